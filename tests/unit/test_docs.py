"""The documentation holds together and to the code: README.md stays a ten-minute read that links every page of
docs/, every relative link resolves (anchors too), and the exit-code table, the environment-variable table and
the package layout of docs/ are what the code has."""

from __future__ import annotations

import re

import pytest

from kpatch.errors import ExitCode
from tests.support.readme import DOCS, README, ROOT, documents, prose, spans

README_MAX_LINES = 250  # a newcomer reads it in ten minutes; the rest lives in docs/
# Pages other helpers write, linked before they land: allowed only while missing, then checked like every other.
PENDING_PAGES = {"docs/json.md"}
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    return {_slug(line.lstrip("#")) for line in prose(text).splitlines() if line.startswith("#")}


def test_the_readme_is_a_ten_minute_read() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {(README.parent / target.split("#")[0]).resolve()
              for target in _LINK.findall(README.read_text(encoding="utf-8")) if "://" not in target}
    orphans = sorted(p.name for p in DOCS.glob("*.md") if p.resolve() not in linked)
    assert not orphans, f"docs/ pages the README does not link: {orphans}"


def test_every_relative_link_in_the_docs_resolves() -> None:
    pages = dict(documents())
    checked = 0
    for name, text in documents():
        for target in _LINK.findall(prose(text)):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            page = (ROOT / name).parent / path if path else ROOT / name
            key = page.resolve().relative_to(ROOT).as_posix() if page.resolve().is_relative_to(ROOT) else str(page)
            if key in PENDING_PAGES and not page.exists():
                continue
            assert page.exists(), f"{name}: the link {target} points at nothing"
            if anchor:
                assert key in pages, f"{name}: {target}: an anchor into a file that is not a document"
                assert anchor in _anchors(pages[key]), f"{name}: {target}: {key} has no heading #{anchor}"
            checked += 1
    assert checked > 20  # the links were found (a broken pattern would pass vacuously)


def test_the_exit_code_table_lists_every_exit_code_kpatch_has() -> None:
    text = (DOCS / "exit-codes.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+(?:-\d+)?) \|", text, re.MULTILINE)
    single = {int(code) for code in rows if "-" not in code}
    assert single == {int(code) for code in ExitCode}, (sorted(single), sorted(int(c) for c in ExitCode))
    for code in rows:  # a range row ("1-7" for nightly) spans codes that exist
        if "-" in code:
            low, high = map(int, code.split("-"))
            assert {low, high} <= single


def _code_variables() -> set[str]:
    """Every KPATCH_* variable the package names in a string: the ones it reads and the ones it sets."""
    found: set[str] = set()
    for path in (ROOT / "kpatch").rglob("*.py"):
        found |= set(re.findall(r"[\"'](KPATCH_[A-Z_]*)[\"'\s]", path.read_text(encoding="utf-8")))
    found.discard("KPATCH_")  # the prefix itself (procs.py passes every KPATCH_* to upstream code)
    return {f"{name}<NAME>" if name.endswith("_") else name for name in found}  # "KPATCH_URL_" + the upstream


def test_the_environment_table_names_every_kpatch_variable_of_the_code_and_no_other() -> None:
    text = (DOCS / "commands.md").read_text(encoding="utf-8")
    table = text[text.index("| variable | what it does |"):].split("\n\n", 1)[0]
    named = {name for row in table.splitlines()[2:] for name in re.findall(r"`(KPATCH_[A-Z_]+(?:<NAME>)?)`",
                                                                           row.split(" | ")[0])}
    assert named == _code_variables(), (sorted(named - _code_variables()), sorted(_code_variables() - named))


def test_every_kpatch_variable_the_docs_name_exists() -> None:
    code = _code_variables()
    scripts = "".join(p.read_text(encoding="utf-8", errors="replace") for p in (ROOT / "scripts").iterdir()
                      if p.is_file())
    for name, text in documents():
        for variable in set(re.findall(r"(?<![A-Z_])(KPATCH_[A-Z_]*[A-Z](?:_<NAME>)?)", text)):
            assert variable in code or variable in scripts, f"{name} names {variable}, which nothing reads or sets"


def _layout() -> list[str]:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    tree = next(block for block in re.findall(r"```text\n(.*?)```", text, re.DOTALL) if block.startswith("kpatch/"))
    return [line.split()[0] for line in tree.splitlines() if line.startswith("  ") and not line.startswith("   ")]


def test_the_architecture_names_only_packages_and_modules_that_exist() -> None:
    names = _layout()
    assert len(names) > 15
    missing = [name for name in names if not (ROOT / "kpatch" / name.rstrip("/")).exists()]
    assert not missing, f"docs/architecture.md names what kpatch/ does not have: {missing}"


def test_the_architecture_names_every_package() -> None:
    packages = {p.parent.name + "/" for p in (ROOT / "kpatch").glob("*/__init__.py")}
    unnamed = sorted(packages - set(_layout()))
    assert not unnamed, f"docs/architecture.md does not name the packages {unnamed}"


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_every_page_starts_with_one_title(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    titles = [line for line in prose(text).splitlines() if line.startswith("# ")]
    assert text.startswith("# ") and len(titles) == 1, titles


def test_the_format_patch_options_docs_stacks_lists_are_the_ones_export_passes() -> None:
    from kpatch.gitx.patches import FORMAT_PATCH

    text = (DOCS / "stacks.md").read_text(encoding="utf-8")
    listed = re.findall(r"^- `(-[^`]+)`$", text, re.MULTILINE)
    assert listed and set(listed) <= set(FORMAT_PATCH), sorted(set(listed) - set(FORMAT_PATCH))


def test_the_trailers_docs_stacks_lists_are_the_ones_kpatch_reads() -> None:
    from kpatch.stack.mbox import UpstreamStatus

    text = (DOCS / "stacks.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^- `([A-Za-z-]+): ([^`]+)`", text, re.MULTILINE))
    assert set(listed) == {"Upstream-Status", "Upstream-PR", "Requires", "Backport-Of", "Lines"}
    assert set(listed["Upstream-Status"].split("|")) == {status.value for status in UpstreamStatus}


# Paths the documents name that are a project's, not this repository's: what each one is.
PROJECT_PATHS = {"scripts/build-wheel.sh": "a project's own build script, next to its kpatch.toml",
                 "patches/.rerere": "made once a conflict has been resolved", "patches/.rerere/": "the same"}


def test_every_repository_path_the_docs_name_exists() -> None:
    named = [(name, span) for name, text in documents() for span in spans(text)
             if re.fullmatch(r"(kpatch|tests|scripts|ci|patches|docs|\.ci)/[\w./-]*", span)]
    assert len(named) > 20
    missing = [f"{name}: {path}" for name, path in named if not (ROOT / path).exists() and path not in PROJECT_PATHS]
    assert not missing, f"the documents name paths that do not exist: {missing}"
