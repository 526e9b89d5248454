"""The nightly report's two renderings (markdown and JSON) carry the same facts; GitHub's size limit; where the
branch may be pushed. No git, no Docker."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kpatch.dashboard.night import (
    REPORT_VERSION,
    AcceptedFinding,
    Clock,
    Failure,
    Flag,
    Move,
    Report,
    Stage,
    StageRun,
    StageStatus,
    Suite,
    report_from_json,
)
from kpatch.dashboard.night import Outcome as Night
from kpatch.engine.reports import PatchReport
from kpatch.forge.github import Action, Kind, Outcome, Result
from kpatch.nightly import render
from kpatch.nightly.publish import _repository_in, carries_credential
from kpatch.project.state import Culprit, Hunk, PatchClass
from kpatch.verify.model import Check, Status
from kpatch.wheels.record import BuiltWheel

CULPRIT = Culprit(sha="c" * 40, subject="Rework the silu | registration", author="Up Stream <up@example.invalid>",
                  date="2026-11-29T10:00:00+00:00", trials=5, commits=30)


def _failed_night() -> Report:
    return Report(
        kpatch_version="9.9", started="2026-11-30T02:17:00Z", outcome=Night.FAILED, exit_code=1,
        summary="failed at test (exit 1): test: kernels: 1 failed, 0 error(s)",
        stages=(StageRun(Stage.REBASE, StageStatus.PASSED, 1.25, 0, "2 patch(es)"),
                StageRun(Stage.BUILD, StageStatus.PASSED, 3.5, 0, "2 wheel(s)"),
                StageRun(Stage.VERIFY, StageStatus.PASSED, 0.5, 0, "5 checks, 0 failed"),
                StageRun(Stage.TEST, StageStatus.FAILED, 7.75, 1, "test: kernels: 1 failed, 0 error(s)")),
        moves=(Move("kernels", "main", "a" * 40, "b" * 40, 12),),
        patches=(PatchReport("kernels", "0001-op.patch", PatchClass.THREE_WAY, True, "", None, (), None),
                 PatchReport("kernels", "0002-gone.patch", PatchClass.UPSTREAM, True,
                             'same patch-id as upstream "x"', "d" * 40, (), None),
                 PatchReport("app", "0001-use.patch", PatchClass.CONFLICT, False, "trial apply", None,
                             (Hunk("app/x.py", 12),), CULPRIT)),
        flags=(Flag("kernels", "0001-op.patch", "o/k#592", "e" * 40, "merged upstream, not yet in the base: drop "
                    "after the next bump"),),
        wheels=(BuiltWheel("kernels", "k-1.0+kpatch.1-cp38-abi3-linux_x86_64.whl", "1.0+kpatch.1", "f" * 64, False,
                      "2.14.0+xpu"),),
        lock="/p/dist/pylock.toml", checks=(Check("contract", "kernels -> app", Status.PASS, "every op served"),),
        accepted=(AcceptedFinding("kernels -> app", "_C.gather_cache", "undefined", "app/gather.py::gather",
                                  "app/gather.py:5", "gather runs on CUDA only"),),
        suites=(Suite("kernels", "failed", "1 failed, 0 error(s)", 5, 1, 0, 0, ("tests.t::test_rope[2]: boom",),
                      ("tests.t::test_rope[2]",), (), True, None, 1.5),),
        failure=Failure(Stage.TEST, 1, "test: kernels: 1 failed, 0 error(s)", ("look at reports/",),
                        ("E   assert 1 == 2", "FAILED tests/t.py::test_rope[2]")),
        github=(Result(Kind.ISSUE, Action.OPEN, Outcome.DONE, None, 1, "opened issue #4"),),
        clock=Clock(fetch=0.25, rebase=1.0, build=3.5, verify=0.5, test=7.75, scroll=0.0, report=0.05, publish=0.7,
                    total=14.0))


def test_markdown_and_json_carry_the_same_facts(tmp_path: Path) -> None:
    report = _failed_night()
    md_path, json_path = render.write(tmp_path, report)
    md, data = md_path.read_text(), json.loads(json_path.read_text())
    assert data["ok"] is False and data["outcome"] == "failed" and data["failure"]["stage"] == "test"
    facts = [CULPRIT.sha, CULPRIT.author, "app/x.py:12", "o/k#592", "merged upstream, not yet in the base: drop "
             "after the next bump", "tests.t::test_rope[2]", "k-1.0+kpatch.1-cp38-abi3-linux_x86_64.whl",
             "2.14.0+xpu", "/p/dist/pylock.toml", "every op served", "look at reports/", "E   assert 1 == 2",
             "opened issue #4", "7.8 s", "d" * 40, "_C.gather_cache", "app/gather.py::gather",
             "gather runs on CUDA only"]
    text = json.dumps(data)
    in_markdown = {CULPRIT.author: "Up Stream &lt;up@example.invalid&gt;"}  # HTML escaped there, not in JSON
    in_json = {"7.8 s": "7.75", "app/x.py:12": '{"path": "app/x.py", "line": 12}'}  # a hunk as `rebase --json`'s
    assert [f for f in facts if in_markdown.get(f, f) not in md] == []
    assert [f for f in facts if in_json.get(f, f) not in text] == []
    assert md.startswith("# kpatch nightly: FAILED at test\n")
    assert '"Rework the silu \\| registration" by Up Stream' in md  # a list item: the text, its pipe escaped


def test_the_clock_shows_every_part_of_the_night_with_its_share_and_the_whole_night() -> None:
    md = render.markdown(_failed_night())
    clock = md.split("## Clock\n", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in clock.splitlines()
            if line.startswith("| ") and not line.startswith("| part")}
    assert rows == {"fetch": "0.2 s", "rebase": "1.0 s", "build": "3.5 s", "verify": "0.5 s", "test": "7.8 s",
                    "scroll": "0.0 s", "report": "0.1 s", "publish": "0.7 s", "**night**": "**14.0 s**"}
    assert "| test | 7.8 s | 55 % |" in clock
    assert "## Clock" not in render.markdown(replace(_failed_night(), clock=None))  # an older kpatch's report


def test_a_table_cell_keeps_its_row() -> None:
    report = _failed_night()
    lines = render.markdown(report).splitlines()
    row = next(line for line in lines if line.startswith("| app | 0001-use.patch"))
    assert row.count(" | ") == 3  # the culprit's `|` is escaped, not a new column


def test_a_body_too_long_for_github_is_cut_with_a_note() -> None:
    long = replace(_failed_night(), notes=tuple(f"note {n} " + "x" * 200 for n in range(400)))
    body = render.for_github(long)
    assert len(body) < 65_536 and body.endswith("(cut: the whole report is report.md in the run's artifact)\n")
    assert len(render.markdown(long)) > 65_536


@pytest.mark.parametrize(("url", "named"), [
    ("https://github.com/acme/stack", "acme/stack"), ("https://github.com/acme/stack.git", "acme/stack"),
    ("https://x-access-token:t@github.com/acme/stack.git/", "acme/stack"), ("git@github.com:acme/stack.git",
                                                                         "acme/stack"),
    ("ssh://git@github.com:22/acme/fork.git", "acme/fork"), ("https://ghe.corp/acme/stack", None),
    ("/srv/git/origin.git", None), ("file:///srv/git/origin.git", None), ("../origin.git", None),
])
def test_origin_names_a_github_repository_only_on_that_host(url: str, named: str | None) -> None:
    assert _repository_in(url, "github.com") == named


def test_a_file_with_a_credential_is_never_pushed(tmp_path: Path) -> None:
    clean, lock = tmp_path / "kpatch.toml", tmp_path / "pylock.toml"
    clean.write_text('url = "https://github.com/vllm-project/vllm.git"\n')
    lock.write_text('url = "https://x-access-token:ghs_secret@github.com/vllm-project/vllm.git"\n')
    assert carries_credential([clean, tmp_path / "patches"]) is None
    assert carries_credential([clean, lock]) == lock


HOSTILE = {  # upstream text -> what must not reach GitHub's prose as it is (GitHub would act on it)
    "Ping @octocat and @acme/team": ("@octocat", "@acme"),
    "Fixes #12, see GH-7": ("#12", "GH-7"),
    '<img src="https://evil.example/x.png">': ("<img",),
    "<!-- everything after this is hidden": ("<!--",),
    "[click](https://evil.example)": ("[click](",),
    "**loud** _emphasis_ `code` ~~gone~~": ("**loud**", "_emphasis_", "`code`", "~~gone~~"),
}


def _hostile_night(text: str) -> Report:
    """Upstream text in every place the report shows it: a culprit's subject and author, a test id, messages."""
    culprit = replace(CULPRIT, subject=text, author=f"{text} <x@example.invalid>")
    night = _failed_night()
    return replace(night, summary=text,
                   patches=(PatchReport("app", "0001-use.patch", PatchClass.CONFLICT, False, text, None,
                                        (Hunk(text, None),), culprit),
                            PatchReport("kernels", "0002-gone.patch", PatchClass.UPSTREAM, True, text, "d" * 40,
                                        (), None)),
                   suites=(replace(night.suites[0], message=text, failing=(f"t.py::test[{text}]",),
                                   newly_failing=(text,), running=text),),
                   checks=(Check("contract", text, Status.FAIL, text, text),), contract=(text,),
                   failure=Failure(Stage.TEST, 1, text, (text,), (text, "```", text)),
                   notes=(text,), github=())


@pytest.mark.parametrize("text", sorted(HOSTILE))
def test_upstream_text_reaches_github_as_text(text: str) -> None:
    """Subjects and author names land in the issue and pull request bodies: no pings, HTML, links or markup
    outside code spans and the log's fenced block (which nothing in the text can end)."""
    import re

    body = render.for_github(_hostile_night(text))
    fence = re.search(r"^(`{3,})text\n.*?^\1$", body, re.MULTILINE | re.DOTALL)
    assert fence is not None and fence.group(1) == "````", body  # longer than the log's ``` line
    code = re.compile(r"(?<![`\\])(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
    prose = code.sub("", body[:fence.start()] + body[fence.end():])
    assert text.splitlines()[0][:12] in body or "&lt;" in prose  # the text is there, as text
    assert [raw for raw in HOSTILE[text] if raw in prose] == [], prose


def test_a_report_reads_back_from_its_json_as_it_was() -> None:
    """The publishing job reads the night's report.json (nightly --publish-saved): every fact comes back."""
    from kpatch.dashboard.night import report_from_json

    report = replace(_failed_night(), dry_run="no GITHUB_TOKEN")
    assert report_from_json(json.loads(render.to_json(report))) == report


def _scrolled_night() -> Report:
    from kpatch.dashboard.night import Breaker, Pin, Scroll, Span, Step, StepResult

    green, red = "1" * 40, "2" * 40
    scroll = Scroll(
        spans=(Span("app", "a" * 40, "b" * 40, 5, green, red),),
        steps=(Step("app", green, "News 1", StepResult.GREEN, 16.5, None, "the whole chain passed",
                    (Pin("kernels", "c" * 40), Pin("app", green))),
               Step("app", red, "Tighten the sampler @someone #12", StepResult.RED, 30.75, Stage.TEST,
                    "test: app: 1 failed", (Pin("kernels", "c" * 40), Pin("app", red)))),
        last_green=(Pin("kernels", "c" * 40), Pin("app", green)), advanced=True,
        culprit=Breaker("app", red, "Tighten the sampler @someone #12", "Up Stream <up@example.invalid>",
                        "2023-11-14T22:21:43+00:00", Stage.TEST, "test: app: 1 failed",
                        ("tests.t::test_sampler: planted",), ("E   AssertionError: planted",)),
        flaky=("tests.t::test_scheduler",), complete=True, stopped=None, max_steps=8, budget=None, seconds=47.25)
    return replace(_failed_night(), scroll=scroll)


def test_a_scrolled_night_reads_back_from_its_json_as_it_was() -> None:
    """nightly --publish-saved: the search (steps, last green, culprit, flaky) comes back from report.json."""
    from kpatch.dashboard.night import report_from_json

    report = _scrolled_night()
    assert report_from_json(json.loads(render.to_json(report))) == report


def test_a_scrolled_nights_markdown_names_the_last_green_the_culprit_and_the_flaky_tests_as_text() -> None:
    text = render.markdown(_scrolled_night())
    assert "## Scrolling: the last green upstream commits" in text
    assert "the chain is green at kernels `cccccccccccc`, app `111111111111`: the pull request proposes" in text
    assert "| 2 | 1 | app | `222222222222` | Tighten the sampler @\u200bsomeone #\u200b12 | red | test | " \
        "this process | 30.8 s |" in text
    named = f"app `{'2' * 40}` \"Tighten the sampler @\u200bsomeone #\u200b12\" by Up Stream &lt;up@example.invalid&gt;"
    assert named in text
    assert "- `tests.t::test_sampler: planted`" in text and "E   AssertionError: planted" in text
    assert "never a culprit): `tests.t::test_scheduler`" in text


def test_report_json_carries_its_version_and_a_patch_as_rebase_json_has_it(tmp_path: Path) -> None:
    data = json.loads(render.write(tmp_path, _failed_night())[1].read_text())
    assert data["version"] == REPORT_VERSION == 2
    conflict = data["patches"][2]
    assert list(conflict) == ["upstream", "name", "class", "applied", "why", "commit", "hunks", "culprit",
                              "upstream_commits"]
    assert conflict["hunks"] == [{"path": "app/x.py", "line": 12}]
    assert report_from_json(data) == _failed_night()


def test_a_version_1_report_json_is_read_back_in_todays_shape() -> None:
    """report.json is read back (`nightly --publish-saved`): one written before version 2 (`patch`, `klass`,
    "path:line" hunks, no `version`) still reads."""
    data = json.loads(render.to_json(_failed_night()))
    del data["version"]
    for patch in data["patches"]:
        patch["patch"], patch["klass"] = patch.pop("name"), patch.pop("class")
        patch["hunks"] = [f"{h['path']}:{h['line']}" for h in patch["hunks"]]
    for wheel in data["wheels"]:
        del wheel["compiler_cache"]
    assert report_from_json(data) == _failed_night()
