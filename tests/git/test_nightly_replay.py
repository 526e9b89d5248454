"""`kpatch nightly --replay FROM..TO`: the example project's kernels upstream gets six days of real commits with a
rework planted on day 3 that breaks the kernels' first patch (reverted on day 5); the replay walks them one day (or
N commits) at a time through the nightly's rebase stage, in a scratch folder, and appends each step's night to the
carry history. Real git repositories throughout; nothing of the project changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result

from kpatch.dashboard import history
from kpatch.errors import ExitCode
from kpatch.examples.upstreams import EPOCH, KERNEL_FILES, commit
from tests.support.gitrepos import Project, git
from tests.support.json_envelope import checked
from tests.support.nightly_world import BINDINGS, BROKEN, CULPRIT_SUBJECT, K1

DAY = 86_400
DAYS = 6
REVERT_SUBJECT = 'Revert "Rework the silu registration"'


def _noon(day: int) -> int:
    """Seconds after EPOCH (22:13:20 UTC) of noon, `day` days after the example's history."""
    return (10 + day) * DAY + (DAY - EPOCH % DAY) + 12 * 3600


def _six_days(project: Project) -> dict[str, str]:
    """Two kernels commits a day for six days; day 3's second one is the rework, day 5's first the revert."""
    made: dict[str, str] = {}
    for day in range(DAYS):
        for n in range(2):
            files, subject = {"NEWS.txt": f"day {day} entry {n}\n"}, f"News {day}.{n}"
            if (day, n) == (2, 1):
                files, subject = {BINDINGS: BROKEN}, CULPRIT_SUBJECT
            if (day, n) == (4, 0):
                files, subject = {BINDINGS: KERNEL_FILES[BINDINGS]}, REVERT_SUBJECT
            made[subject] = commit(project.kernels, files, subject, _noon(day) + 60 * n)
    return made


def _replay(project: Project, *args: str) -> Result:
    return project.run("nightly", "--replay", f"kernels={project.kernels_base}..main", *args)


def _mirror_state(cache: Path) -> dict[str, str]:
    """Every ref and every rr-cache entry of the project's mirrors: what a replay must leave alone."""
    state = {}
    for mirror in sorted((cache / "mirrors").glob("*.git")):
        state[mirror.name] = git(mirror, "for-each-ref", "--format=%(refname) %(objectname)")
        state[mirror.name + ":rr-cache"] = " ".join(sorted(p.name for p in (mirror / "rr-cache").glob("*")))
        state[mirror.name + ":worktrees"] = " ".join(sorted(p.name for p in (mirror / "worktrees").glob("*")))
    return state


def test_a_daily_replay_names_each_conflict_its_culprit_and_the_nights_a_person_was_needed(
        project: Project, tmp_path: Path) -> None:
    made = _six_days(project)
    path = tmp_path / "carry" / "history.jsonl"
    result = project.run("nightly", "--json", "--replay", f"kernels={project.kernels_base}..main", "--history",
                         str(path))
    assert result.exit_code == 0, result.output
    done = checked(result.stdout, "nightly")["result"]
    steps = done["steps"]
    assert len(steps) == DAYS + 1  # the example's own history (one day), then one step per day
    assert [s["commit"] for s in steps[1:]] == [made[f"News {d}.1"] if (d, 1) != (2, 1) else made[CULPRIT_SUBJECT]
                                               for d in range(DAYS)]
    assert [s["person"] for s in steps] == [False, False, False, True, True, False, False]
    for step in steps[3:5]:
        assert step["conflict"] == 1 and step["conflicts"] == [
            {"patch": f"kernels/{K1}", "culprit": made[CULPRIT_SUBJECT], "culprit_subject": CULPRIT_SUBJECT}]
    # The conflict nights leave the pin at day 1's last commit: each next night starts from it again.
    assert [s["behind"] for s in steps[3:]] == [2, 4, 6, 2]
    assert done["person_nights"] == 2 and done["conflicts"] == 2
    assert done["culprits"] == [{"sha": made[CULPRIT_SUBJECT], "subject": CULPRIT_SUBJECT,
                                 "patches": [f"kernels/{K1}"], "nights": 2}]
    assert done["base"] == git(project.kernels, "rev-parse", "main")
    held = history.read(path)
    assert [n.date for n in held.nights] == [s["date"][:10] for s in steps]
    assert [n.outcome for n in held.nights] == ["failed" if s["person"] else "passed" for s in steps]
    assert all(n.stages[0].stage == "rebase" and {s.status for s in n.stages[1:]} == {"skipped"}
               for n in held.nights)
    conflicts = [p for p in held.patches if p.conflict]
    assert [(p.date, p.patch, p.culprit) for p in conflicts] == [
        (s["date"][:10], K1, made[CULPRIT_SUBJECT]) for s in steps[3:5]]
    assert done["records"] == len(held.nights) + len(held.patches)


def test_a_replay_changes_nothing_of_the_project_byte_for_byte(project: Project, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Files, worktrees (their HEADs), the run state, the writer lock, the mirrors' refs and recorded
    resolutions: all as they were; the scratch folder is gone."""
    assert project.run("apply").exit_code == 0
    _six_days(project)
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    cache = tmp_path / "home" / ".cache" / "kpatch"
    lock = project.root / ".kpatch" / "lock"
    before, mirrors, locked = project.snapshot(), _mirror_state(cache), (lock.read_bytes(), lock.stat().st_mtime_ns)
    worktrees = {name: git(project.workdir / name, "status", "--porcelain") for name in ("kernels", "app")}
    result = project.run("nightly", "--replay", f"kernels={project.kernels_base}..main", "--history",
                         str(tmp_path / "h.jsonl"))
    assert result.exit_code == 0, result.output
    assert "nights a person would have been needed: 2 of 7" in result.stdout
    assert project.snapshot() == before
    assert _mirror_state(cache) == mirrors
    assert (lock.read_bytes(), lock.stat().st_mtime_ns) == locked
    assert {name: git(project.workdir / name, "status", "--porcelain") for name in ("kernels", "app")} == worktrees
    assert list(temp.iterdir()) == []  # the scratch folder went away
    assert (tmp_path / "h.jsonl").is_file()


def test_step_n_cuts_the_range_every_n_commits_and_ends_at_to(project: Project, tmp_path: Path) -> None:
    _six_days(project)
    first, last = project.kernels_base, git(project.kernels, "rev-parse", "main")
    total = int(git(project.kernels, "rev-list", "--count", "--first-parent", f"{first}..main"))
    result = project.run("nightly", "--json", "--replay", f"{first}..main", "--step", "5", "--history",
                         str(tmp_path / "h.jsonl"))
    assert result.exit_code == 0, result.output
    done = checked(result.stdout, "nightly")["result"]
    assert done["upstream"] == "kernels" and done["per"] == "5 commit(s)" and done["commits"] == total
    assert [s["commits"] for s in done["steps"]] == [5] * (total // 5) + ([total % 5] if total % 5 else [])
    assert done["steps"][-1]["commit"] == last


def test_the_default_history_is_the_dashboards_and_report_draws_the_replayed_nights(project: Project) -> None:
    _six_days(project)
    result = _replay(project)
    assert result.exit_code == 0, result.output
    path = project.root / "reports" / "nightly" / history.NAME
    drawn = project.run("report", "--json")
    assert drawn.exit_code == 0, drawn.output
    board = json.loads(drawn.stdout)["result"]["board"]
    assert board["nights"] == DAYS + 1 and path.is_file()
    (row,) = [r for r in board["patches"] if r["patch"] == K1]
    assert row["conflicts"] == 2 and row["culprit_subject"] == CULPRIT_SUBJECT


@pytest.mark.parametrize(("args", "code", "words"), [
    (["--replay", "kernels=main"], ExitCode.BAD_INPUT, "expected [NAME=]FROM..TO"),
    (["--replay", "nosuch=a..b"], ExitCode.BAD_INPUT, "unknown upstream 'nosuch'"),
    (["--replay", "kernels=v1.0..no-such-ref"], ExitCode.UPSTREAM, "'no-such-ref' is not a commit"),
    (["--replay", "kernels=main..v1.0"], ExitCode.BAD_INPUT, "does not come after"),
    (["--replay", "kernels=v1.0..main", "--max-steps", "2"], ExitCode.BAD_INPUT, "more than --max-steps 2"),
    (["--replay", "kernels=v1.0..main", "--step", "2", "--daily"], ExitCode.BAD_INPUT, "give one"),
    (["--replay", "kernels=v1.0..main", "--publish-saved"], ExitCode.BAD_INPUT, "--publish-saved"),
    (["--step", "2"], ExitCode.BAD_INPUT, "--step goes with --replay"),
    (["--history", "h.jsonl"], ExitCode.BAD_INPUT, "--history goes with --replay"),
], ids=["no-range", "unknown-upstream", "unknown-ref", "backwards", "too-many-steps", "step-and-daily",
        "publish-saved", "step-alone", "history-alone"])
def test_a_bad_replay_is_one_error_line_with_its_exit_code_and_writes_nothing(
        project: Project, tmp_path: Path, args: list[str], code: ExitCode, words: str) -> None:
    _six_days(project)
    before = project.snapshot()
    history_args = [] if "--history" in args else ["--history", str(tmp_path / "h.jsonl")]
    if args[0] != "--replay":
        history_args = []
    result = project.run("nightly", *args, *history_args)
    assert result.exit_code == code, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0], result.stderr
    assert project.snapshot() == before and not (tmp_path / "h.jsonl").exists()
