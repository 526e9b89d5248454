"""A released half of the pair as `verify --wheel` takes it: a wheel, an sdist, a folder, a requirement
(`vllm_xpu_kernels==0.1.15.4`, fetched through the package index's simple API and checked against the sha256 the
index lists), or with `--python` a distribution installed in that environment; opened into a folder to read."""

from __future__ import annotations

import email.parser
import html.parser
import json
import os
import shutil
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from kpatch import procs
from kpatch.errors import UpstreamError, UsageError
from kpatch.files import sha256

PYPI = "https://pypi.org/simple"
_SOURCE_SUFFIXES = (".py", ".cpp", ".cc", ".cxx", ".cu", ".h", ".hpp", ".cuh", ".txt", ".cmake")
_SDIST_SUFFIXES = (".tar.gz", ".zip")
_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class Release:
    """One half, opened: where its files are and what it is."""

    given: str  # what the user passed
    name: str  # the distribution name ("" when a folder says none)
    version: str
    kind: str  # "wheel", "sdist", "folder" or "installed"
    root: Path  # the folder whose packages are read
    packages: tuple[str, ...] | None  # its top-level packages under root (None: every package folder under root)
    sha256: str = ""  # of the file, when it was one

    def label(self) -> str:
        named = f"{self.name} {self.version}".strip() if self.name else self.given
        return f"{named} ({self.kind})"


def open_release(given: str, dest: Path, *, python: str | None = None, cache: Path | None = None,
                 index: str | None = None) -> Release:
    """The half `given` names, unpacked under `dest` when it is an archive; a requirement is downloaded from
    `index` (default: index_url()) into `cache` (by sha256) first. Raises UsageError (a bad file or name) or
    UpstreamError (the index)."""
    path = Path(given).expanduser()
    if path.is_dir():
        return _folder(given, path)
    if path.is_file():
        return _archive(given, path, dest)
    if os.sep in given or given.endswith((".whl", *_SDIST_SUFFIXES)):
        raise UsageError(f"--wheel {given}: no such file or folder")
    try:
        req = Requirement(given)
    except InvalidRequirement as err:
        raise UsageError(f"--wheel {given}: neither a file, a folder nor a requirement ({err})") from None
    if python is not None and not req.specifier:
        return installed(given, req.name, python)
    pins = [s for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
    if len(pins) != 1 or len(req.specifier) != 1:
        raise UsageError(f"--wheel {given}: a requirement must pin one version (name==version)"
                         + ("" if python else "; a bare name needs --python (an installed environment)"))
    file = download(req.name, pins[0].version, cache or dest / "downloads", index)
    return _archive(given, file, dest)


def _folder(given: str, path: Path) -> Release:
    meta = next(iter(sorted(path.glob("*.dist-info/METADATA"))), None) or (path / "PKG-INFO")
    name, version = _name_version(meta) if meta.is_file() else ("", "")
    return Release(given, name, version, "folder", path, None)


def _name_version(meta: Path) -> tuple[str, str]:
    msg = email.parser.Parser().parsestr(meta.read_text(encoding="utf-8", errors="replace"), headersonly=True)
    return msg.get("Name", ""), msg.get("Version", "")


def _archive(given: str, path: Path, dest: Path) -> Release:
    """A wheel or an sdist unpacked into a fresh folder under dest (only what the contract reads)."""
    digest = sha256(path)
    target = dest / digest[:16]
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    try:
        if path.name.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(path.name)
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if _wanted_in_wheel(info.filename):
                        _extract_member(zf, info, target)
            return Release(given, str(name), str(version), "wheel", target, None, digest)
        if path.name.endswith(_SDIST_SUFFIXES):
            name, version = parse_sdist_filename(path.name)
            _extract_sdist(path, target)
            tops = [p for p in target.iterdir() if p.is_dir()]
            root = tops[0] if len(tops) == 1 else target
            return Release(given, str(name), str(version), "sdist", root, None, digest)
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as err:
        raise UsageError(f"--wheel {given}: cannot be unpacked: {err}") from None
    except ValueError as err:  # a file name that is not a wheel's or an sdist's
        raise UsageError(f"--wheel {given}: {err}") from None
    raise UsageError(f"--wheel {given}: not a wheel (.whl) or an sdist (.tar.gz, .zip)")


def _wanted_in_wheel(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return (name.endswith(".py") or name.endswith("dist-info/METADATA")
            or (base.endswith(".so") and not base.startswith("lib")))


def _extract_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path) -> None:
    out = (target / info.filename).resolve()
    if not out.is_relative_to(target.resolve()) or info.is_dir():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with zf.open(info) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


def _extract_sdist(path: Path, target: Path) -> None:
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.filename.endswith(_SOURCE_SUFFIXES) or info.filename.endswith("PKG-INFO"):
                    _extract_member(zf, info, target)
        return
    root = target.resolve()
    with tarfile.open(path, "r:*") as tar:  # only the regular files the contract reads, never outside target
        for member in tar:
            if not (member.isfile() and member.name.endswith((*_SOURCE_SUFFIXES, "PKG-INFO"))):
                continue
            out = (root / member.name).resolve()
            source = tar.extractfile(member)
            if source is None or Path(member.name).is_absolute() or not out.is_relative_to(root):
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            with source, out.open("wb") as dst:
                shutil.copyfileobj(source, dst, 1 << 20)


def installed(given: str, name: str, python: str) -> Release:
    """A distribution installed in the environment of `python`: its folder and its top-level packages."""
    script = ("import importlib.metadata as m, json, sys\n"
              "try:\n d = m.distribution(sys.argv[1])\n"
              "except m.PackageNotFoundError:\n print('null'); raise SystemExit\n"
              "files = [f for f in (d.files or []) if len(f.parts) > 1 and not f.parts[0].endswith('-info')"
              " and (f.suffix in ('.py', '.so'))]\n"
              "print(json.dumps({'name': d.metadata['Name'], 'version': d.version, 'root': str(d.locate_file('')),"
              " 'packages': sorted({f.parts[0] for f in files})}))\n")
    done = procs.run([python, "-c", script, name], env=dict(os.environ), timeout=120, merge=False)
    if done.status != 0:
        raise UsageError(f"--python {python}: cannot be run ({done.output.strip().splitlines()[-1:] or done.status})")
    found = json.loads(done.output.strip().splitlines()[-1])
    if found is None:
        raise UsageError(f"--wheel {given}: not installed in the environment of {python}")
    return Release(given, found["name"], found["version"], "installed", Path(found["root"]),
                   tuple(found["packages"]))


def index_url() -> str:
    """The index pip is configured with ($PIP_INDEX_URL, else pip's config), else PyPI's."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"].rstrip("/")
    done = procs.run([sys.executable, "-m", "pip", "config", "list"], env=dict(os.environ), timeout=60)
    for line in done.output.splitlines() if done.status == 0 else []:
        key, _, value = line.partition("=")
        if key.endswith(".index-url") and value.strip("'\""):
            return value.strip("'\"").rstrip("/")
    return PYPI


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str


def index_files(project: str, index: str | None = None) -> list[IndexFile]:
    """The files the index lists for a project (PEP 691 JSON, else the PEP 503 page), with their sha256."""
    base = index or index_url()
    url = f"{base}/{canonicalize_name(project)}/"
    request = urllib.request.Request(url, headers={"Accept": f"{_JSON}, text/html;q=0.1"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:  # noqa: S310  # the configured index
            body = reply.read()
            kind = reply.headers.get("Content-Type", "")
            final = reply.geturl()
    except OSError as err:
        raise UpstreamError(f"package index {url}: {err}") from None
    files: list[IndexFile] = []
    if kind.startswith(_JSON):
        for entry in json.loads(body)["files"]:
            files.append(IndexFile(entry["filename"], urllib.parse.urljoin(final, entry["url"]),
                                   entry.get("hashes", {}).get("sha256", "")))
        return files
    parser = _Links()
    parser.feed(body.decode("utf-8", errors="replace"))
    for href, text in parser.links:
        link, _, fragment = urllib.parse.urljoin(final, href).partition("#")
        digest = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else ""
        files.append(IndexFile(text.strip() or link.rsplit("/", 1)[-1], link, digest))
    return files


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self.links.append((self._href or "", ""))

    def handle_data(self, data: str) -> None:
        if self._href is not None and self.links:
            self.links[-1] = (self.links[-1][0], self.links[-1][1] + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._href = None


def choose(files: list[IndexFile], project: str, version: str) -> IndexFile | None:
    """The release's file to read: its sdist (the source: C++ declarations and Python), else a pure wheel, else a
    manylinux x86_64 one (the platform the released kernels are built for)."""
    want = Version(version)
    candidates: list[tuple[int, IndexFile]] = []
    for f in files:
        try:
            if f.filename.endswith(".whl"):
                name, ver, _, tags = parse_wheel_filename(f.filename)
                rank = 1 if any(t.platform == "any" for t in tags) else (
                    2 if any("x86_64" in t.platform for t in tags) else 9)
            elif f.filename.endswith(_SDIST_SUFFIXES):
                name, ver = parse_sdist_filename(f.filename)
                rank = 0
            else:
                continue
        except (ValueError, InvalidVersion):
            continue
        if canonicalize_name(name) == canonicalize_name(project) and ver == want and rank < 9:
            candidates.append((rank, f))
    return min(candidates, key=lambda c: (c[0], c[1].filename))[1] if candidates else None


def download(project: str, version: str, cache: Path, index: str | None = None) -> Path:
    """The release's file from the index into `cache/<sha256>/`, checked against the sha256 the index lists
    (a cached copy is checked again); raises UpstreamError when it is missing or its sha256 differs."""
    base = index or index_url()
    files = index_files(project, base)
    chosen = choose(files, project, version)
    if chosen is None:
        raise UpstreamError(f"package index {base}: no sdist or x86_64 wheel of {project}=={version}")
    if not chosen.sha256:
        raise UpstreamError(f"package index {base}: {chosen.filename} is listed without a sha256, so it cannot be "
                            "checked")
    target = cache / chosen.sha256 / chosen.filename
    if target.is_file() and sha256(target) == chosen.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(chosen.url, timeout=300) as reply, part.open("wb") as out:  # noqa: S310
            shutil.copyfileobj(reply, out, 1 << 20)
    except OSError as err:
        part.unlink(missing_ok=True)
        raise UpstreamError(f"package index {base}: downloading {chosen.filename}: {err}") from None
    got = sha256(part)
    if got != chosen.sha256:
        part.unlink()
        raise UpstreamError(f"package index {base}: {chosen.filename} has sha256 {got}, the index lists "
                            f"{chosen.sha256}")
    part.replace(target)
    return target
