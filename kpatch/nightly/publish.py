"""The night on GitHub: the refreshed files pushed as `kpatch/nightly` and ONE pull request on a passing night
with changes; ONE `nightly-failure` issue on a failed night; that issue closed by the next passing night.

Nothing here raises for GitHub's sake: every step ends as a Result or a Push in the report, and the night's exit
code stays the run's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kpatch.config.model import MAIN
from kpatch.dashboard.night import Outcome, Push, PushStatus, Report
from kpatch.errors import KpatchError
from kpatch.forge import Forge, github
from kpatch.forge.model import Action
from kpatch.forge.model import Outcome as Done
from kpatch.gitx import branch
from kpatch.nightly.render import for_github
from kpatch.output.redact import redact_text, redact_url
from kpatch.output.ui import UI
from kpatch.project.state import PatchClass
from kpatch.project.workspace import Workspace

BRANCH = "kpatch/nightly"
ISSUE_TITLE = "kpatch nightly failed"


@dataclass(frozen=True)
class LineNames:
    """A line's nights on GitHub: its own branch, failure issue (its label) and the line in every title."""

    branch: str
    label: str
    suffix: str  # after the titles: "" for main, " (line 0.33)" for a release line


def names_of(line: str) -> LineNames:
    """Main's nights keep their names (kpatch/nightly, nightly-failure); a release line's have their own, so one
    line's good night never closes another's failure issue nor pushes over its branch."""
    if line == MAIN:
        return LineNames(BRANCH, github.FAILURE_LABEL, "")
    return LineNames(f"{BRANCH}-{line}", f"{github.FAILURE_LABEL}-{line}", f" (line {line})")


@dataclass(frozen=True)
class Published:
    push: Push | None
    results: tuple[github.Result, ...]


def publish(ws: Workspace, ui: UI, report: Report, tgt: github.Target, environ: Mapping[str, str],
            retry: github.RetryPolicy, paths: list[Path], dashboard: str | None = None) -> Published:
    """Report the night: an issue when it failed; else the branch, its pull request, and the issue closed. The
    carry dashboard issue (`dashboard`, its body) is edited in place every night."""
    results: list[github.Result] = []
    push = None
    own = names_of(ws.stack.line)
    reporter: Forge = github.Reporter(tgt, retry=retry)
    with reporter as gh:
        if report.outcome is Outcome.FAILED:
            stage = report.failure.stage.value if report.failure else "?"
            results.append(gh.report_failure(f"{ISSUE_TITLE}{own.suffix} at {stage}",
                                             for_github(report, run_url(environ)), own.label))
            if report.scroll is not None and report.scroll.advanced:  # the heads are red, the last green is not
                top = branch.checkout_of(ws.stack.root)
                push = _push(ws, report, tgt, top, paths)
                if push.status in (PushStatus.PUSHED, PushStatus.DRY_RUN):
                    assert top is not None
                    results.append(gh.ensure_pull_request(own.branch, _base(top, environ), _title(report) + own.suffix,
                                                          for_github(report, run_url(environ))))
            results += _dashboard(gh, dashboard)
            for result in results:
                (ui.note if result.ok else ui.warn)(f"GitHub: {result.message}")
            return Published(push, tuple(results))
        if report.outcome is Outcome.PASSED:
            top = branch.checkout_of(ws.stack.root)
            push = _push(ws, report, tgt, top, paths)
            if push.status in (PushStatus.PUSHED, PushStatus.DRY_RUN):
                assert top is not None
                results.append(gh.ensure_pull_request(own.branch, _base(top, environ), _title(report) + own.suffix,
                                                      for_github(report, run_url(environ))))
        results.append(gh.close_failure(f"kpatch nightly{own.suffix} {report.outcome.value} ({report.started}): "
                                        f"{report.summary}", own.label))
        results += _dashboard(gh, dashboard)
    for result in results:
        (ui.note if result.ok else ui.warn)(f"GitHub: {result.message}")
    return Published(push, tuple(results))


def _dashboard(gh: Forge, body: str | None) -> list[github.Result]:
    """The carry dashboard issue, edited in place ([dashboard] issue = true in kpatch.toml; else body is None), and
    pinned the night it is opened (once: a person who unpins it is not overruled). A pin that fails is one more
    warning line, never the night's exit code."""
    # imported where used: the dashboard issue's text only when that issue is on
    from kpatch.dashboard.markdown import ABOUT, LABEL, TITLE

    if body is None:
        return []
    kept = gh.keep_issue(f"kpatch {TITLE}", body, LABEL, ABOUT)
    if kept.action is Action.OPEN and kept.outcome is Done.DONE and kept.ref is not None:
        return [kept, gh.pin_issue(kept.ref.number)]
    return [kept]


def _push(ws: Workspace, report: Report, tgt: github.Target, top: Path | None, paths: list[Path]) -> Push:
    """Commit the refreshed files on the checkout's HEAD (touching neither) and push them as the line's branch."""
    name = names_of(ws.stack.line).branch
    if top is None:
        return Push(name, PushStatus.SKIPPED, None, None, None, (),
                    f"{ws.stack.root} is not in a git checkout with a commit: nothing to push, no pull request")
    if branch.current_branch(top) == name:
        return Push(name, PushStatus.SKIPPED, None, None, None, (),
                    f"the checkout is on {name} itself: run the nightly from the branch the pull request targets")
    leaking = carries_credential(paths)
    if leaking is not None:  # e.g. a lock built from a --url with user:token@ in it: never pushed
        return Push(name, PushStatus.SKIPPED, None, None, None, (),
                    f"not pushed: {leaking} carries a credential (a URL with user info, or the token)")
    snap = branch.snapshot(top, paths, _message(report))
    if snap.commit is None:
        return Push(name, PushStatus.UNCHANGED, None, snap.parent, None, (),
                    f"the refreshed files equal {snap.parent[:12]}: nothing to push, no pull request")
    destination, problem = _destination(top, tgt)
    shown = redact_url(destination) if destination else None
    what = f"{snap.commit[:12]} ({len(snap.files)} file(s) on {snap.parent[:12]})"
    if destination is None:
        return Push(name, PushStatus.SKIPPED, snap.commit, snap.parent, None, snap.files, f"not pushed: {problem}")
    if tgt.dry_run:
        return Push(name, PushStatus.DRY_RUN, snap.commit, snap.parent, shown, snap.files,
                    f"would push {what} to {shown} ({tgt.dry_run})")
    target = github.push_target(tgt)
    try:
        branch.push(top, snap.commit, destination, name, target.env if target else {})
    except KpatchError as err:
        message = tgt.token.redact(str(err)) if tgt.token else str(err)
        return Push(name, PushStatus.FAILED, snap.commit, snap.parent, shown, snap.files,
                    redact_text(f"push to {shown} failed: {message}"))
    return Push(name, PushStatus.PUSHED, snap.commit, snap.parent, shown, snap.files, f"pushed {what} to {shown}")


def carries_credential(paths: list[Path]) -> Path | None:
    """The first of the files to push that holds a URL with user info or a known token, or None."""
    for path in paths:
        if path.is_file():
            text = path.read_text("utf-8", "replace")
            if redact_text(text) != text:
                return path
    return None


def _destination(top: Path, tgt: github.Target) -> tuple[str | None, str]:
    """Where the branch goes: the checkout's `origin` (the workflow's checkout of this repository), else the
    repository kpatch reports to; never an origin that is another repository on the same GitHub."""
    origin = branch.remote_url(top, "origin")
    target = github.push_target(tgt)
    if origin is None:
        return (target.url, "") if target else (None, "no origin remote and no GitHub repository")
    if target is not None and tgt.repository is not None:
        named = _repository_in(origin, urlsplit(target.url).hostname or "")
        if named is not None and named.lower() != str(tgt.repository).lower():
            return None, (f"origin ({redact_url(origin)}) is {named}, but the pull request goes to "
                          f"{tgt.repository}")
    return origin, ""


def _repository_in(url: str, host: str) -> str | None:
    """`owner/name` when `url` (https or scp-like ssh) points at a repository on `host`, else None."""
    match = re.match(r"^(?:[a-z+]+://)?(?:[^@/]+@)?([^/:]+)(?::\d+)?[:/](.+?)(?:\.git)?/?$", url)
    if match is None or match.group(1).lower() != host.lower():
        return None
    parts = match.group(2).strip("/").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 else None


def _base(top: Path, environ: Mapping[str, str]) -> str:
    """The branch the pull request targets: the one the nightly ran on (the workflow's checkout)."""
    return branch.current_branch(top) or environ.get("GITHUB_REF_NAME") or "main"


def run_url(environ: Mapping[str, str]) -> str | None:
    """This GitHub Actions run's page (its artifacts are there), or None outside one."""
    parts = [environ.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    if not all(parts) or not parts[0].startswith("https://") or not parts[2].isdigit():
        return None
    return f"{parts[0].rstrip('/')}/{parts[1]}/actions/runs/{parts[2]}"


def _title(report: Report) -> str:
    if report.scroll is not None and report.scroll.advanced:
        bases = ", ".join(f"{p.upstream} {p.commit[:12]}" for p in report.scroll.last_green)
        return f"kpatch nightly: the stacks on the last green {bases} (the heads are red)"
    bases = ", ".join(f"{m.upstream} {m.new_base[:12]}" for m in report.moves)
    return f"kpatch nightly: the stacks on {bases}" if bases else "kpatch nightly: refreshed stacks"


def _message(report: Report) -> str:
    lines = [_title(report), ""]
    if report.scroll is not None and report.scroll.advanced:
        lines += [f"{s.upstream}: {s.base[:12]} -> {s.last_green[:12]} (the last green of {s.commits} upstream "
                  f"commit(s); the head {s.head[:12]} is red)" for s in report.scroll.spans]
        lines += ["", f"Written by kpatch {report.kpatch_version} nightly ({report.started}); built, verified and "
                  "tested at these commits."]
        return "\n".join(lines) + "\n"
    lines += [f"{m.upstream}: {m.old_base[:12]} -> {m.new_base[:12]} ({m.commits} upstream commit(s))"
              for m in report.moves]
    dropped = [f"{p.upstream}/{p.name}" for p in report.patches if p.klass is PatchClass.UPSTREAM]
    if dropped:
        lines += ["", "Dropped as already upstream: " + ", ".join(dropped)]
    lines += ["", f"Written by kpatch {report.kpatch_version} nightly ({report.started}); built, verified and tested."]
    return "\n".join(lines) + "\n"
