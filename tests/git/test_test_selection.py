"""Test selection's choice on a real git repository: which test files the upstream diff touches (their own file,
or a module they import: absolute, `from M import n`, relative), and the order $KPATCH_TESTS gets."""

from __future__ import annotations

from pathlib import Path

from kpatch.examples.upstreams import commit, init_repo
from kpatch.gitx.repo import Repository
from kpatch.nightly.selection import select

FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": "X = 1\n",
    "pkg/sub/__init__.py": "",
    "pkg/sub/tools.py": "Y = 1\n",
    "src/lib/thing.py": "Z = 1\n",
    "tests/__init__.py": "",
    "tests/helpers.py": "H = 1\n",
    "tests/test_absolute.py": "import pkg.core\n\n\ndef test_a():\n    assert pkg.core.X\n",
    "tests/test_from_name.py": "from pkg.sub import tools\n\n\ndef test_b():\n    assert tools.Y\n",
    "tests/test_relative.py": "from . import helpers\n\n\ndef test_c():\n    assert helpers.H\n",
    "tests/test_src_layout.py": "from lib.thing import Z\n\n\ndef test_d():\n    assert Z\n",
    "tests/test_broken.py": "def test_e(:\n",
    "tests/unit/core_test.py": "def test_f():\n    pass\n",
    "tests/conftest.py": "import pkg.core\n",
}


def _repo(tmp_path: Path) -> tuple[Repository, str]:
    init_repo(tmp_path / "up")
    return Repository(tmp_path / "up"), commit(tmp_path / "up", FILES, "base", 1)


def _first(repo: Repository, base: str, changes: dict[str, str]) -> tuple[list[str], list[str], tuple[str, ...]]:
    tip = commit(repo.path, changes, "change", 2)
    selection, order = select(repo, "up", base, tip, tip, ("tests",))
    return list(selection.first), list(selection.why), order


def test_only_the_tests_that_import_a_changed_module_go_first_each_with_its_reason(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    first, why, order = _first(repo, base, {"pkg/core.py": "X = 2\n", "pkg/sub/tools.py": "Y = 2\n"})
    assert first == ["tests/test_absolute.py", "tests/test_from_name.py"]
    assert why == ["imports pkg.core (pkg/core.py changed)", "imports pkg.sub.tools (pkg/sub/tools.py changed)"]
    # then the rest in path order; conftest.py and helpers are no test files, a broken test file still runs
    assert order == ("tests/test_absolute.py", "tests/test_from_name.py", "tests/test_broken.py",
                     "tests/test_relative.py", "tests/test_src_layout.py", "tests/unit/core_test.py")


def test_a_changed_test_file_a_relative_import_and_a_src_layout_module_each_put_their_test_first(
        tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    first, why, _ = _first(repo, base, {"tests/helpers.py": "H = 2\n", "src/lib/thing.py": "Z = 2\n",
                                        "tests/unit/core_test.py": "def test_f():\n    assert 1\n"})
    assert first == ["tests/test_relative.py", "tests/test_src_layout.py", "tests/unit/core_test.py"]
    assert why == ["imports tests.helpers (tests/helpers.py changed)", "imports lib.thing (src/lib/thing.py changed)",
                   "changed"]


def test_a_diff_touching_no_test_and_no_imported_module_keeps_path_order(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    first, _, order = _first(repo, base, {"NEWS.txt": "news\n", "pkg/__init__.py": "# touched\n"})
    assert first == [] and list(order) == sorted(order) and len(order) == 6
