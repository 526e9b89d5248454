"""`--line` on nightly, propose, release and report: each works on that line's stacks, base and folders
(reports-<line>/, dist-<line>/), through the one path every --line command resolves a line by."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from kpatch.examples.lines import LINE, LineProject, make_line_project, release_commit
from kpatch.wheels import lock as lockfile
from tests.support.cli import run_kpatch


@pytest.fixture
def lp(tmp_path: Path) -> LineProject:
    return make_line_project(tmp_path)


@pytest.mark.parametrize("args", [("nightly", "--no-publish"), ("propose", "app/x.patch", "--dry-run"),
                                  ("release", "--to", "out"), ("report",)])
def test_an_unknown_line_on_nightly_propose_release_report_is_one_line_naming_it_and_kpatch_toml(
        lp: LineProject, args: tuple[str, ...]) -> None:
    toml = (lp.root / "kpatch.toml").read_bytes()
    result = run_kpatch(lp.root, *args, "--line", "0.8")
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "unknown line '0.8'" in errors[0] and "kpatch.toml" in errors[0], result.output
    assert (lp.root / "kpatch.toml").read_bytes() == toml
    assert not (lp.root / "out").exists() and not (lp.root / "reports").exists()


def test_a_line_night_moves_only_the_lines_base_writes_its_own_report_dist_history_and_nightly_channel(
        lp: LineProject) -> None:
    """Its lock is kept in patches/<line>/pylock.toml (main's pylock.toml untouched), and with `[release] nightly =
    true` its green night publishes on the line's own nightly channel (site/<line>/nightly/), never on main's."""
    root = lp.root
    with (root / "kpatch.toml").open("a", encoding="utf-8") as toml:
        toml.write('\n[release]\nnightly = true\nto = "site"\n')
    before = tomllib.loads((root / "kpatch.toml").read_text())
    new = release_commit(lp.example.kernels, {"csrc/release-notes.txt": "0.9.1\n"}, "Release 0.9.1 notes", 600)
    night = run_kpatch(root, "nightly", "--line", LINE, "--no-publish", "--backend", "local", "--json")
    assert night.exit_code == 0, night.output
    after = tomllib.loads((root / "kpatch.toml").read_text())
    assert after["line"][LINE]["kernels"]["base"] == new  # the line's base moved to its branch head
    assert after["upstream"] == before["upstream"]  # main's as it was
    assert (root / f"reports-{LINE}" / "nightly" / "report.json").is_file()
    assert (root / f"dist-{LINE}" / "pylock.toml").is_file()
    assert not (root / "reports").exists() and not (root / "dist").exists()  # main's folders untouched
    # the green night's lock is kept for the line's branch in the line's folder, never as main's pylock.toml
    assert json.loads(night.stdout)["result"]["kept_lock"] == str(root / "patches" / LINE / "pylock.toml")
    kept = (root / "patches" / LINE / "pylock.toml").read_bytes()
    assert kept == (root / f"dist-{LINE}" / "pylock.toml").read_bytes()
    assert not (root / "pylock.toml").exists()
    lock = lockfile.read(root / f"dist-{LINE}" / "pylock.toml")
    app = next(w for w in lock.wheels if w.upstream == "app")
    tag = "nightly-" + app.version.replace("+", "-")
    (note,) = [n for n in json.loads(night.stdout)["result"]["notes"] if n.startswith("release: ")]
    assert note.startswith(f"release: app {app.version} published as {tag} on the nightly channel of line {LINE} (")
    assert f"--index-url {(root / 'site' / LINE / 'nightly' / 'simple').as_uri()} " in note
    ledger = json.loads((root / "site" / LINE / "nightly" / "releases.json").read_text())
    assert [r["tag"] for r in ledger["releases"]] == [tag]
    page = (root / "site" / LINE / "nightly" / "simple" / "app" / "index.html").read_text()
    assert f"{app.filename}#sha256={app.sha256}" in page
    assert not (root / "site" / "nightly").exists() and not (root / "site" / "stable").exists()
    board = run_kpatch(root, "report", "--line", LINE, "--json")
    assert board.exit_code == 0, board.output
    assert json.loads(board.stdout)["result"]["board"]["history"] == \
        str(root / f"reports-{LINE}" / "nightly" / "history.jsonl")


def test_report_and_release_on_a_line_read_that_lines_history_and_lock(lp: LineProject) -> None:
    root = lp.root
    assert run_kpatch(root, "apply", "--line", LINE).exit_code == 0
    release_commit(lp.example.kernels, {"csrc/release-notes.txt": "0.9.1\n"}, "Release 0.9.1 notes", 600)
    assert run_kpatch(root, "rebase", "--line", LINE).exit_code == 0  # a rebase records into the line's history
    assert (root / f"reports-{LINE}" / "nightly" / "history.jsonl").is_file()
    assert not (root / "reports").exists()
    board = run_kpatch(root, "report", "--line", LINE, "--json")
    assert board.exit_code == 0, board.output
    read = json.loads(board.stdout)["result"]["board"]
    assert read["history"] == str(root / f"reports-{LINE}" / "nightly" / "history.jsonl") and read["patches"]
    released = run_kpatch(root, "release", "--line", LINE, "--to", str(root / "index"))
    assert released.exit_code != 0 and str(root / f"dist-{LINE}" / "pylock.toml") in released.output, \
        released.output  # the line's set is asked for, not main's dist/


def test_a_line_night_flags_a_main_patch_merged_upstream_that_the_line_lacks(lp: LineProject) -> None:
    """Main's "Guard the layernorm kernel" (Upstream-PR #601, merged) is missing on the line: the line's night
    flags it with the backport to run; main's other fix (no Upstream-PR) is not flagged."""
    from tests.support.fake_github import fake_github

    root = lp.root
    release_commit(lp.example.kernels, {"csrc/release-notes.txt": "0.9.1\n"}, "Release 0.9.1 notes", 600)
    with fake_github() as fake:
        fake.add_pull("vllm-project/vllm-xpu-kernels", 601, merged=True, merge_commit_sha="a" * 40)
        env = {"KPATCH_GITHUB_API": fake.url, "GITHUB_TOKEN": None, "KPATCH_GITHUB_RETRY_DELAY": "0"}
        night = run_kpatch(root, "nightly", "--line", LINE, "--no-publish", "--backend", "local", "--json", env=env)
    assert night.exit_code == 0, night.output
    flags = json.loads(night.stdout)["result"]["flags"]
    assert [(f["upstream"], f["pr"]) for f in flags] == [("kernels", "vllm-project/vllm-xpu-kernels#601")], flags
    assert "missing on line 0.9" in flags[0]["note"] and f"--to {LINE}" in flags[0]["note"]
    report = (root / f"reports-{LINE}" / "nightly" / "report.md").read_text()
    assert "missing on line 0.9" in report


def test_report_without_line_draws_every_lines_history_that_their_rebases_wrote_on_one_page(lp: LineProject) -> None:
    """Where each line's rebase records (reports/ for main, reports-0.9/ for the line) is where report reads: one
    page, a section and a link per line; --json names both lines."""
    root = lp.root
    for line in ("main", LINE):
        assert run_kpatch(root, "apply", "--line", line).exit_code == 0
        assert run_kpatch(root, "rebase", "--line", line).exit_code == 0
    drawn = run_kpatch(root, "report", "--html", str(root / "site"), "--json")
    assert drawn.exit_code == 0, drawn.output
    result = json.loads(drawn.stdout)["result"]
    assert result["lines"] == ["main", LINE]
    assert result["board"]["history"] == str(root / "reports" / "nightly" / "history.jsonl")
    assert result["others"][0]["board"]["history"] == str(root / f"reports-{LINE}" / "nightly" / "history.jsonl")
    page = (root / "site" / "index.html").read_text()
    assert '<a href="#line-1" data-line="main">main</a>' in page and f'data-line="{LINE}">{LINE}</a>' in page
    assert page.count('<section class="line"') == 2


def test_a_dashboard_history_in_kpatch_toml_is_mains_and_a_line_keeps_its_own(lp: LineProject) -> None:
    """`[dashboard] history` names main's carry history: a release line appending there mixed its nights into main's
    dashboard (and main's into the line's)."""
    root = lp.root
    toml = root / "kpatch.toml"
    toml.write_text(toml.read_text() + '\n[dashboard]\nhistory = "history/main.jsonl"\n')
    assert run_kpatch(root, "apply", "--line", LINE).exit_code == 0
    release_commit(lp.example.kernels, {"csrc/release-notes.txt": "0.9.1\n"}, "Release 0.9.1 notes", 600)
    assert run_kpatch(root, "rebase", "--line", LINE).exit_code == 0
    assert (root / f"reports-{LINE}" / "nightly" / "history.jsonl").is_file()
    assert not (root / "history").exists()
    board = run_kpatch(root, "report", "--line", LINE, "--json")
    assert json.loads(board.stdout)["result"]["board"]["history"] == \
        str(root / f"reports-{LINE}" / "nightly" / "history.jsonl")


@pytest.mark.parametrize("to", ["folder", "github"])
def test_a_line_named_like_a_channel_is_not_released_one_line_naming_it_and_nothing_is_written(
        lp: LineProject, to: str) -> None:
    """Its channels would be DIR/nightly/<channel>/, inside main's nightly channel: refused before anything is
    read or written, for a folder and for github (no GitHub is asked)."""
    root = lp.root
    toml = root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(f'[line."{LINE}".', '[line."nightly".'))
    (root / "patches" / LINE).rename(root / "patches" / "nightly")
    before = toml.read_bytes()
    where = str(root / "out") if to == "folder" else "github"
    env = {"GITHUB_TOKEN": None, "KPATCH_GITHUB_API": "http://127.0.0.1:9"}
    for args in (("--yank", "v1", "--why", "x"), ("--lock", str(root / "no-such" / "pylock.toml"))):
        result = run_kpatch(root, "release", "--line", "nightly", "--to", where, *args, env=env)
        assert result.exit_code == ExitCode.BAD_INPUT, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert errors == ["error: line 'nightly' cannot be released: its channels would be DIR/nightly/<channel>/, "
                          "inside main's nightly channel; rename the line in kpatch.toml"], result.output
    assert toml.read_bytes() == before and not (root / "out").exists()
