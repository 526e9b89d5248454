"""The release index's pages from the channel's ledger: a file two releases share is listed once and yanked only
when every listed release holding it is; Requires-Python reaches the PEP 503 and PEP 691 pages."""

from __future__ import annotations

import json

from kpatch.wheels import index
from kpatch.wheels.release import Release, ReleasedFile, index_files


def _file(name: str, requires_python: str | None = None) -> ReleasedFile:
    return ReleasedFile(filename=name, sha256="a" * 64, size=10, metadata_sha256="b" * 64,
                        requires_python=requires_python)


KERNELS = _file("vllm_xpu_kernels-1.0+kpatch.k1-cp38-abi3-linux_x86_64.whl")


def _release(tag: str, app: str, yanked: str | None = None) -> Release:
    return Release(tag=tag, package="app", version=app, files=(KERNELS, _file(f"app-{app}-py3-none-any.whl", ">=3.10")),
                   torch=None, yanked=yanked)


def test_a_shared_file_is_listed_once_and_yanked_only_with_every_release_holding_it() -> None:
    one, two = _release("r1", "1.0+kpatch.k1.a1"), _release("r2", "1.0+kpatch.k1.a2", yanked="bad")
    files = {f.filename: f for f in index_files([one, two])}
    assert len(files) == 3
    assert files[KERNELS.filename].yanked is None  # r1 still needs it
    assert files["app-1.0+kpatch.k1.a2-py3-none-any.whl"].yanked == "r2: bad"
    both = index_files([_release("r1", "1.0+kpatch.k1.a1", "old"), two])
    assert {f.filename: f.yanked for f in both}[KERNELS.filename] == "r1: old; r2: bad"


def test_requires_python_and_the_yank_reach_both_pages() -> None:
    pages = index.pages(index_files([_release("r2", "1.0+kpatch.k1.a2", yanked="breaks <fp8>")]))
    html = pages["simple/app/index.html"].decode()
    assert 'data-requires-python="&gt;=3.10"' in html and 'data-yanked="r2: breaks &lt;fp8&gt;"' in html
    assert 'href="../../files/app-1.0+kpatch.k1.a2-py3-none-any.whl#sha256=' + "a" * 64 + '"' in html
    (entry,) = json.loads(pages["simple/app/index.json"])["files"]
    assert entry["requires-python"] == ">=3.10" and entry["yanked"] == "r2: breaks <fp8>"
    assert entry["url"] == "../../files/app-1.0+kpatch.k1.a2-py3-none-any.whl"
    assert json.loads(pages["simple/index.json"])["projects"] == [{"name": "app"},
                                                               {"name": "vllm-xpu-kernels"}]


def test_the_notes_take_what_the_pair_cannot_do_from_the_readme_table_row() -> None:
    from pathlib import Path

    from kpatch.wheels.notes import cannot_do

    readme = Path(__file__).resolve().parents[2] / "README.md"
    found = cannot_do(readme)
    assert found is not None and found.startswith("`fp8_ds_mla`: vllm-xpu-kernels has no")
    assert cannot_do(readme.parent / "no-such-readme.md") is None
