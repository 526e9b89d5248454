"""Hostile input, round three (issue 37), the weak items: what an upstream writes is printed escaped, a kill leaves
no patch text in temp folders, user-named files are read with a bound, journal copies are never followed, and
full disks, odd cache folders and odd test file names get one clear line.

kpatch runs as its own process here (tests/support/cli.py) wherever a user would run it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.dashboard import history
from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit, init_repo
from kpatch.gitx.repo import Repository
from kpatch.nightly.selection import select
from kpatch.testing.run import tests_variable as kpatch_tests_value  # not named test*: pytest would collect it
from tests.git.test_blobless import mirror, missing, promisor, serve
from tests.git.test_security_three import NEW_FILE, one_error
from tests.git.test_storage import Mounts
from tests.support.cli import kpatch
from tests.support.gitrepos import Project, mirror_dir
from tests.support.rebase_repos import FILES, RebaseProject, replace_line

# --- terminal escapes in upstream text ----------------------------------------------------------------------------

EVIL_SUBJECT = "Rewrite d \x1b]0;pwned\x07 then \x1b[2J\x9b31m\u202egnp.exe"
EVIL_AUTHOR = "Eve \x1b[31mRed"


def test_an_upstream_subject_and_author_with_terminal_escapes_are_printed_escaped_off_a_terminal(
        rp: RebaseProject) -> None:
    """The culprit of a conflict is printed with its subject and author: raw, they retitled the window and
    cleared the screen of whoever read the rebase's output (or the CI log it went to)."""
    commit(rp.kernels, {"d.txt": replace_line(FILES["d"], 20, "d line 20 rewritten")}, EVIL_SUBJECT, 900,
           author=(EVIL_AUTHOR, "eve@example.org"))
    for args in (["rebase"], ["report"], ["status"], ["rebase", "--abort"]):
        ran = kpatch(rp.root, *args)
        for control in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert control not in ran.output, (args, ran.output)
        if args == ["rebase"]:
            assert ran.exit_code == ExitCode.CONFLICT, ran.output
            assert 'Rewrite d \\x1b]0;pwned\\x07 then \\x1b[2J\\x9b31m\\u202egnp.exe"' in ran.stdout
            assert "Eve \\x1b[31mRed <eve@example.org>" in ran.stdout


# --- kills leave no patch text in temp folders ------------------------------------------------------------------------


def _killed_at(root: Path, kind: str, tmp: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    """kpatch ARGS SIGKILLed (a real kill, at the seam `scratch:<kind>`) while its `kind` temp folder is full: the
    folder it left in `tmp` (the temp folder: $TMPDIR)."""
    killed = kpatch(root, *args, env={**(env or {}), "KPATCH_TEST_KILL_AT": f"scratch:{kind}", "TMPDIR": str(tmp)})
    assert killed.exit_code == -signal.SIGKILL, killed.output
    (left,) = tmp.glob(f"kpatch-{kind}-*")
    assert any(p.is_file() and p.stat().st_size for p in left.rglob("*")), "the kill left nothing to sweep"
    return left


def _recovers(root: Path, tmp: Path, *args: str, env: dict[str, str] | None = None) -> str:
    ran = kpatch(root, *args, env={**(env or {}), "TMPDIR": str(tmp)})
    assert ran.exit_code == 0, ran.output
    assert not list(tmp.iterdir()), list(tmp.iterdir())
    return ran.stderr


@pytest.mark.parametrize("kind", ["picks", "stack", "index", "export"])
def test_a_rebase_killed_with_patch_text_in_a_temp_folder_leaves_none_after_the_next_writer(
        project: Project, tmp_path: Path, kind: str) -> None:
    """picks: the fast path's todo list; stack: the range-diff review's throwaway worktree (and its record in the
    mirror); index: that review's stand-in base, a throwaway index of the stack's files; export: the new patch
    files being written. The review makes its old side from the patch files only when the fast path has no
    picked commits to take it from: a stack never applied here."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    if kind in ("picks", "export"):  # an applied stack: the fast path picks its commits (the review's old side too)
        assert kpatch(project.root, "apply").exit_code == 0
    commit(project.kernels, {"NEWS.txt": "news\n"}, "News", 5000)
    left = _killed_at(project.root, kind, tmp, "rebase")
    said = _recovers(project.root, tmp, "rebase", "--abort")
    # the folder it was killed in, and any other a thread of it had open then (the review's side, made ahead)
    assert re.search(r"removed [0-9]+ temp folder\(s\) a killed kpatch left \(e\.g\. ", said), said
    assert not left.exists(), left
    mirror = mirror_dir(Path(os.environ["XDG_CACHE_HOME"]) / "kpatch", "kernels")
    records = [(r / "gitdir").read_text() for r in (mirror / "worktrees").glob("*")]
    assert not [r for r in records if "kpatch-stack-" in r], records
    assert kpatch(project.root, "rebase").exit_code == 0  # and the rebase runs again


def test_a_rebase_killed_during_its_trial_applies_leaves_no_trial_index(rp: RebaseProject, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    _killed_at(rp.root, "trial", tmp, "rebase")
    _recovers(rp.root, tmp, "rebase", "--abort")


def test_an_import_killed_while_reading_its_mails_leaves_no_mail(project: Project, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    new = tmp_path / "new"
    new.mkdir()
    assert kpatch(new, "init", "--upstream", f"kernels={project.kernels}@{project.kernels_base}").exit_code == 0
    folder = tmp_path / "quilt"
    folder.mkdir()
    (folder / "0001-a.patch").write_text("Subject: A secret note\n\n" + NEW_FILE)
    # a non-ASCII author (format-patch encodes it): a mail git itself reads, in a temp folder (a plain one is read
    # in process and writes none)
    _killed_at(new, "mail", tmp, "import", "kernels", "--series", str(folder), "--author",
               "A \u00dc Thor <a@example.org>")
    _recovers(new, tmp, "apply")


def test_a_replay_killed_mid_way_leaves_no_scratch_project(project: Project, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    commit(project.kernels, {"NEWS.txt": "news\n"}, "News", 5000)
    _killed_at(project.root, "replay", tmp, "nightly", "--replay", f"kernels={project.kernels_base}..main",
               "--history", str(tmp_path / "history.jsonl"))
    _recovers(project.root, tmp, "apply")


def test_the_sweep_takes_a_dead_kpatchs_temp_folder_and_keeps_a_running_ones(project: Project,
                                                                              tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout.strip()
    with subprocess.Popen(["sleep", "600"]) as alive:
        try:
            folders = {name: tmp / f"kpatch-mail-{pid}-abcd1234" for name, pid in (("dead", dead),
                                                                                    ("alive", alive.pid))}
            folders["older"] = tmp / "kpatch-mail-x1y2z3w4"  # an older kpatch's name, with no pid: not ours to guess
            for folder in folders.values():
                folder.mkdir()
                (folder / "mbox").write_text("Subject: a secret being read\n")
            ran = kpatch(project.root, "apply", env={"TMPDIR": str(tmp)})
            assert ran.exit_code == 0, ran.output
            assert sorted(tmp.iterdir()) == sorted([folders["alive"], folders["older"]])
        finally:
            alive.kill()


# --- user-named files are read with a bound -----------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000 + "\n"  # one history line nested 100,000 deep


def _history(root: Path, value: str) -> None:
    toml = root / "kpatch.toml"
    toml.write_text(toml.read_text() + f'\n[dashboard]\nhistory = "{value}"\n')


def test_a_history_line_nested_too_deeply_is_one_error_naming_the_line(project: Project) -> None:
    path = project.root / "carry.jsonl"
    path.write_text(DEEP)
    _history(project.root, "carry.jsonl")
    ran = kpatch(project.root, "report")
    one_error(ran, ExitCode.BAD_INPUT, f"{path}:1: not a history record (JSON nested too deeply)")


def test_a_rebase_that_succeeded_ends_well_when_its_history_cannot_be_read(project: Project) -> None:
    """The rebase had committed its new bases when the history was appended: a history problem is a warning."""
    path = project.root / "carry.jsonl"
    path.write_text(DEEP)
    _history(project.root, "carry.jsonl")
    assert kpatch(project.root, "apply").exit_code == 0
    commit(project.kernels, {"NEWS.txt": "news\n"}, "News", 5000)
    ran = kpatch(project.root, "rebase")
    assert ran.exit_code == 0, ran.output
    assert f"warning: carry history not updated: {path}:1: not a history record (JSON nested too deeply)" in \
        ran.stderr
    assert path.read_text() == DEEP
    assert kpatch(project.root, "export", "--check").exit_code == 0


@pytest.mark.parametrize("value", ["../../outside.jsonl", "{outside}"])
def test_a_dashboard_history_outside_the_project_is_refused_and_nothing_is_written_there(
        project: Project, tmp_path: Path, value: str) -> None:
    outside = tmp_path / "outside.jsonl"
    value = value.format(outside=outside)
    assert kpatch(project.root, "apply").exit_code == 0
    _history(project.root, value if value.startswith("/") else f"../{outside.name}")
    commit(project.kernels, {"NEWS.txt": "news\n"}, "News", 5000)
    ran = kpatch(project.root, "rebase")
    line = one_error(ran, ExitCode.BAD_INPUT, f"'history' {value if value.startswith('/') else '../outside.jsonl'!r}"
                     f" leads outside the project ({outside})")
    assert line.startswith(f"error: {project.root / 'kpatch.toml'}:")
    assert not outside.exists()


@pytest.mark.parametrize(("command", "named"), [
    (["nightly", "--replay", "kernels=v1.0..main"], "/dev/full"),
    (["nightly", "--replay", "kernels=v1.0..main"], "/dev/zero"),
    (["nightly", "--replay", "kernels=v1.0..main"], "huge"),
    (["report"], "huge"),  # report takes only a regular file already ("no carry history at /dev/full")
])
def test_a_history_that_is_a_device_or_too_big_is_refused_without_reading_it(
        project: Project, tmp_path: Path, command: list[str], named: str) -> None:
    """`--history /dev/full` was read until the OOM killer stopped kpatch (23 GB)."""
    path = Path(named)
    why = "is a device, not a regular file"
    if named == "huge":
        path = tmp_path / "huge.jsonl"
        with path.open("wb") as handle:  # sparse: no disk used
            handle.truncate(257 * 2**20)
        why = "is larger than 256 MiB"
    ran = kpatch(project.root, *command, "--history", str(path), timeout=120)
    one_error(ran, ExitCode.BAD_INPUT, f"{path} {why}: not a carry history kpatch reads")


# --- journal copies that are symlinks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("copy", ["new", "old"])
def test_a_journal_copy_that_is_a_symlink_is_never_planted_nor_read_through(project: Project, tmp_path: Path,
                                                                            copy: str) -> None:
    """A staged copy that is a link: `--continue` moved the link into patches/; a kept copy that is a link:
    `--abort` wrote the outside file's text over the patch file. Both refuse, and `--abort` sets the journal
    aside, the files as they were."""
    assert kpatch(project.root, "apply").exit_code == 0
    target = project.root / "patches" / "kernels" / "series"
    outside = tmp_path / "outside.txt"
    outside.write_text("someone else's text\n")
    folder = project.root / ".kpatch" / "journal"
    (folder / "new").mkdir(parents=True)
    (folder / "old").mkdir()
    (folder / "operation").write_text("export")
    (folder / "journal.json").write_text(json.dumps(
        {"operation": "export", "steps": [{"target": str(target), "new": "0", "old": "w0"}]}))
    (folder / "new" / "0").write_text("new series\n")
    (folder / "old" / "w0").write_bytes(target.read_bytes())
    (folder / copy / ("0" if copy == "new" else "w0")).unlink()
    (folder / copy / ("0" if copy == "new" else "w0")).symlink_to(outside)
    before = target.read_bytes()
    ran = kpatch(project.root, "export", "--continue")
    line = one_error(ran, ExitCode.WORKTREE, f"{folder / 'journal.json'}: unreadable journal")
    assert "is not a regular file" in line
    assert not target.is_symlink() and target.read_bytes() == before
    aborted = kpatch(project.root, "export", "--abort")
    assert aborted.exit_code == 0, aborted.output
    assert not target.is_symlink() and target.read_bytes() == before
    assert outside.read_text() == "someone else's text\n"
    assert kpatch(project.root, "status").exit_code == 0


# --- a cache folder that cannot be made -----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["/proc/nope", "under a file"])
def test_init_and_apply_with_a_cache_folder_that_cannot_be_made_name_it_and_write_nothing(
        project: Project, tmp_path: Path, where: str) -> None:
    cache = Path(where)
    if where == "under a file":
        (tmp_path / "cache-file").write_text("not a folder\n")
        cache = tmp_path / "cache-file" / "kpatch"
    new = tmp_path / "new"
    new.mkdir()
    ran = kpatch(new, "init", "--upstream", f"kernels={project.kernels}@{project.kernels_base}",
                 "--cache-dir", str(cache))
    one_error(ran, ExitCode.BAD_INPUT, f"the cache folder {cache} cannot be made (")
    assert list(new.iterdir()) == []
    before = project.snapshot()
    ran = kpatch(project.root, "apply", "--cache-dir", str(cache))
    one_error(ran, ExitCode.BAD_INPUT, f"the cache folder {cache} cannot be made (")
    assert project.snapshot() == before


# --- a full disk names the path -------------------------------------------------------------------------------------


@pytest.fixture
def disks() -> Iterator[Mounts]:
    """Mounts for one test (tmpfs: the tests run as root, as in CI), undone at its end."""
    made = Mounts()
    try:
        yield made
    finally:
        made.undo()


def test_a_full_disk_under_kpatchs_own_folder_names_the_file_kpatch_could_not_write(project: Project,
                                                                                     disks: Mounts) -> None:
    """A rebase on a full file system said "cannot write a file: No space left on device", naming nothing."""
    assert kpatch(project.root, "apply").exit_code == 0
    commit(project.kernels, {"NEWS.txt": "news\n"}, "News", 5000)
    own = project.root / ".kpatch"
    kept = {p.name: p.read_bytes() for p in own.iterdir() if p.is_file()}
    disks.tmpfs(own, 64)
    for name, data in kept.items():
        (own / name).write_bytes(data)
    disks.fill(own)
    before = project.snapshot()
    ran = kpatch(project.root, "rebase")
    line = one_error(ran, ExitCode.GIT, "No space left on device")
    assert f"{own}/" in line, line
    assert {k: v for k, v in project.snapshot().items() if ".filler" not in k} == \
        {k: v for k, v in before.items() if ".filler" not in k}


# --- $KPATCH_TESTS: every test file, one word each ------------------------------------------------------------------


def test_kpatch_tests_keeps_a_non_ascii_name_and_a_path_with_a_space_as_one_file_each(tmp_path: Path) -> None:
    """git quotes a non-ASCII name in `ls-tree` (`"tests/test_\\303\\251t\\303\\251.py"`): it was dropped; and a
    path with a space split into two words in the command's `${KPATCH_TESTS}`."""
    up = tmp_path / "up"
    init_repo(up)
    files = {"tests/test_été.py": "def test_a():\n    pass\n", "tests/test_a b.py": "def test_b():\n    pass\n",
             "tests/test_[x]*.py": "def test_c():\n    pass\n", "tests/test_plain.py": "def test_d():\n    pass\n"}
    base = commit(up, {"README": "x\n"}, "base", 1)
    tip = commit(up, files, "tests", 2)
    repo = Repository(up)
    _, order = select(repo, "up", base, tip, tip, ("tests",))
    assert sorted(order) == sorted(files)
    variable = kpatch_tests_value(order)
    said = subprocess.run(["sh", "-c", 'for f in ${KPATCH_TESTS}; do printf "%s\\n" "$f"; done'], cwd=up,
                          env={**os.environ, "KPATCH_TESTS": variable}, capture_output=True, text=True, check=True)
    assert said.stdout.splitlines() == list(order), said.stdout


# --- a replay on a blobless mirror ------------------------------------------------------------------------------------


def test_a_replay_on_a_blobless_mirror_fetches_what_it_needs_and_records_no_false_red_night(
        rp: RebaseProject, tmp_path: Path) -> None:
    """Every step failed with "unable to read sha1 file" (the scratch mirror, a copy of the blobless one, had no
    promisor remote to ask for blobs) and went into the history as a red night."""
    serve(rp, filters=True)
    assert kpatch(rp.root, "apply", env={"KPATCH_BLOBLESS": "1"}).exit_code == 0
    assert promisor(mirror(rp, "kernels")) and missing(mirror(rp, "kernels"))
    path = tmp_path / "history.jsonl"
    ran = kpatch(rp.root, "nightly", "--json", "--replay", f"kernels={rp.culprit}~3..{rp.culprit}~1", "--history",
                 str(path), env={"KPATCH_BLOBLESS": "1"})
    assert ran.exit_code == 0, ran.output
    assert "unable to read" not in ran.output
    nights = history.read(path).nights
    assert nights and all(n.outcome == "passed" for n in nights), [(n.outcome, n.summary) for n in nights]
