"""A static package index (for GitHub Pages, an object store, any static web server): a PEP 503 HTML page and a
PEP 691 JSON page per project and for the root, every link with its sha256, `data-requires-python` where the
wheel says it, the PEP 658/714 metadata hash and the PEP 592 `data-yanked` reason.

The pages are a function of the files listed (no clock): a page whose bytes do not change is not written again,
and a page that does is written aside and renamed into place, so a reader sees the old page or the new one.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from kpatch.files import write_atomic

API_VERSION = "1.1"  # PEP 691 / PEP 700: `versions` and `size` are in the JSON pages
SIMPLE = "simple"


@dataclass(frozen=True)
class IndexFile:
    """One wheel the index lists: where it is (relative to the index's folder), its hashes and its yank."""

    filename: str
    href: str  # relative to the folder that holds simple/ (e.g. "files/app-1.0-py3-none-any.whl")
    sha256: str
    size: int
    metadata_sha256: str  # of the PEP 658 file beside it (href + ".metadata")
    requires_python: str | None = None
    yanked: str | None = None  # the reason, when every listed release holding the file is yanked

    @property
    def project(self) -> str:
        return canonicalize_name(parse_wheel_filename(self.filename)[0])

    @property
    def version(self) -> str:
        return str(parse_wheel_filename(self.filename)[1])


def pages(files: Iterable[IndexFile]) -> dict[str, bytes]:
    """Every page of the index, by its path under the index's folder ("simple/index.html", ...)."""
    by_project: dict[str, list[IndexFile]] = {}
    for file in files:
        by_project.setdefault(file.project, []).append(file)
    projects = sorted(by_project)
    out = {f"{SIMPLE}/index.html": _root_html(projects), f"{SIMPLE}/index.json": _root_json(projects)}
    for project, listed in sorted(by_project.items()):
        listed.sort(key=lambda f: f.filename)
        out[f"{SIMPLE}/{project}/index.html"] = _project_html(project, listed)
        out[f"{SIMPLE}/{project}/index.json"] = _project_json(project, listed)
    return out


def write(folder: Path, files: Iterable[IndexFile]) -> list[str]:
    """Write the index of `files` into folder/simple/: only the pages whose bytes change, each renamed into place;
    a project no file lists any more keeps its folder but lists nothing. Returns the pages written."""
    wanted = pages(files)
    for old in sorted((folder / SIMPLE).glob("*/index.html")):  # a project that left: its pages list no file
        project = old.parent.name
        if f"{SIMPLE}/{project}/index.html" not in wanted:
            wanted[f"{SIMPLE}/{project}/index.html"] = _project_html(project, [])
            wanted[f"{SIMPLE}/{project}/index.json"] = _project_json(project, [])
    written = []
    for name, data in sorted(wanted.items(), key=lambda item: item[0].startswith(f"{SIMPLE}/index.")):
        path = folder / name  # the root pages last: a project is listed once its page is there
        if _same(path, data):
            continue
        write_atomic(path, data)
        written.append(name)
    return written


def _same(path: Path, data: bytes) -> bool:
    try:
        return path.read_bytes() == data
    except (FileNotFoundError, NotADirectoryError):
        return False


def _head(title: str) -> list[str]:
    return ["<!DOCTYPE html>", "<html>", "<head>", f'<meta name="pypi:repository-version" content="{API_VERSION}">',
            f"<title>{html.escape(title)}</title>", "</head>", "<body>"]


def _root_html(projects: list[str]) -> bytes:
    lines = _head("Simple index") + [f'<a href="{p}/">{p}</a><br>' for p in projects] + ["</body>", "</html>", ""]
    return "\n".join(lines).encode()


def _root_json(projects: list[str]) -> bytes:
    return _json({"meta": {"api-version": API_VERSION}, "projects": [{"name": p} for p in projects]})


def _url(file: IndexFile) -> str:
    """The link from simple/<project>/ to the file, its sha256 as the fragment pip and uv check."""
    where = file.href if "://" in file.href else f"../../{file.href}"  # an asset elsewhere, or beside simple/
    return f"{where}#sha256={file.sha256}"


def _project_html(project: str, files: list[IndexFile]) -> bytes:
    lines = [*_head(f"Links for {project}"), f"<h1>Links for {html.escape(project)}</h1>"]
    for file in files:
        attrs = [f'href="{html.escape(_url(file))}"']
        if file.requires_python:
            attrs.append(f'data-requires-python="{html.escape(file.requires_python)}"')
        attrs.append(f'data-dist-info-metadata="sha256={file.metadata_sha256}"')
        attrs.append(f'data-core-metadata="sha256={file.metadata_sha256}"')
        if file.yanked is not None:
            attrs.append(f'data-yanked="{html.escape(file.yanked)}"')
        lines.append(f"<a {' '.join(attrs)}>{html.escape(file.filename)}</a><br>")
    return "\n".join([*lines, "</body>", "</html>", ""]).encode()


def _project_json(project: str, files: list[IndexFile]) -> bytes:
    entries = []
    for file in files:
        entry: dict[str, object] = {"filename": file.filename, "url": _url(file).split("#")[0],
                                    "hashes": {"sha256": file.sha256}, "size": file.size,
                                    "core-metadata": {"sha256": file.metadata_sha256},
                                    "dist-info-metadata": {"sha256": file.metadata_sha256},
                                    "yanked": file.yanked if file.yanked is not None else False}
        if file.requires_python:
            entry["requires-python"] = file.requires_python
        entries.append(entry)
    versions = sorted({f.version for f in files}, key=Version)
    return _json({"meta": {"api-version": API_VERSION}, "name": project, "versions": versions, "files": entries})


def _json(data: object) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=False) + "\n").encode()
