"""The search as rounds: a state (`Search`), the next round's plan from it (`next_round`: the steps it asks for),
the state its steps' results leave (`take`), and the Scroll at its end (`finish`).

Every executor runs the same rounds: the night's own process (runners = 1), local worker processes (--runners N,
workers.py), or the jobs of the CI's matrix (matrix.py: the state and the plan written to plan.json between
rounds, each step a `kpatch nightly --run-step` job). `search` is the loop for the executors inside one night.

Per upstream, in kpatch.toml's order (kernels first), the others held at their pins (the pinned base, or the last
green commit an earlier upstream's search found), the first-parent commits of base..head are searched: each round
tries up to `runners` of them (kway.plan), and their results narrow the range (kway.narrow).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kpatch.dashboard.night import (
    Breaker,
    Failure,
    Move,
    Pin,
    Scroll,
    Selection,
    Span,
    Stage,
    Step,
    StepResult,
    Suite,
)
from kpatch.nightly import kway
from kpatch.nightly.scroll import Attempt, Limits, Ran, Runner, Trial
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace


@dataclass(frozen=True)
class Tried:
    """An attempt as a file carries it (a step result, the search's state): its lock as the text it is."""

    result: StepResult
    stage: Stage | None
    summary: str
    failure: Failure | None
    suites: tuple[Suite, ...]
    flaky: tuple[str, ...]
    lock: str | None
    selection: tuple[Selection, ...]

    @classmethod
    def of(cls, attempt: Attempt) -> Tried:
        lock = attempt.lock.decode("utf-8") if attempt.lock is not None else None
        return cls(attempt.result, attempt.stage, attempt.summary, attempt.failure, attempt.suites, attempt.flaky,
                   lock, attempt.selection)

    def attempt(self) -> Attempt:
        return Attempt(self.result, self.stage, self.summary, self.failure, self.suites, self.flaky,
                       self.lock.encode("utf-8") if self.lock is not None else None, self.selection)


@dataclass(frozen=True)
class Entry:
    """One step a round asks for (one job of the CI's matrix): the chain with `upstream` at `commit` (the
    `index`-th commit of its range), every upstream at `onto`."""

    number: int  # 1.. within the round
    upstream: str
    commit: str
    index: int
    subject: str
    onto: tuple[Pin, ...]

    def trial(self) -> Trial:
        return Trial(self.upstream, self.commit, {p.upstream: p.commit for p in self.onto})


@dataclass(frozen=True)
class Search:
    """Where the search is between two rounds: everything the next round and the end need."""

    moves: tuple[Move, ...]
    bases: tuple[Pin, ...]  # the night's pinned bases: each step's upstream diff starts there (test selection)
    pins: tuple[Pin, ...]  # the pins so far: an upstream searched is held at its last green commit
    max_steps: int
    budget: float | None
    runners: int
    started: float  # wall clock (seconds since the epoch): the budget counts across processes and jobs
    heads: Tried  # the night's own red run at the heads
    move: int  # the index in `moves` of the upstream being searched (len(moves): none left)
    commits: tuple[str, ...]  # its first-parent range
    lo: int  # commits[lo] known green (-1: the pinned base)
    hi: int  # commits[hi] known red (len(commits): not known)
    red: Tried | None  # the attempt at commits[hi]
    lock: str | None  # the lock of the last green combination
    steps: tuple[Step, ...]
    spans: tuple[Span, ...]
    flaky: tuple[str, ...]
    culprit: Breaker | None
    stopped: str | None
    rounds: int
    done: bool = False


def begin(ws: Workspace, moves: Sequence[Move], heads: Attempt, limits: Limits) -> Search:
    """The search before its first round; the heads' red run is the first red step of a range it covers."""
    pins = tuple(Pin(m.upstream, m.old_base) for m in moves)
    search = Search(moves=tuple(moves), bases=pins, pins=pins, max_steps=limits.max_steps, budget=limits.budget,
                    runners=limits.runners, started=time.time(), heads=Tried.of(heads), move=-1, commits=(), lo=-1,
                    hi=0, red=None, lock=None, steps=(), spans=(), flaky=heads.flaky, culprit=None, stopped=None,
                    rounds=0)
    return _enter(ws, search)


def next_round(ws: Workspace, s: Search) -> tuple[Search, tuple[Entry, ...]]:
    """The next round's steps (none: the search is over), and the search with that round counted."""
    while not s.done:
        size = len(s.commits)
        if not kway.plan(s.lo, s.hi, size, 1):
            s = _enter(ws, _close(ws, s))
            continue
        elapsed = time.time() - s.started
        if len(s.steps) >= s.max_steps:
            s = _close(ws, replace(s, stopped=f"max-steps ({s.max_steps}) reached"))
            continue
        if s.budget is not None and elapsed >= s.budget:
            s = _close(ws, replace(s, stopped=f"the budget ({s.budget:g} s) ran out after {elapsed:.0f} s"))
            continue
        # a round that max-steps cuts short tries fewer commits, still splitting the range evenly
        tries = kway.plan(s.lo, s.hi, size, min(s.runners, s.max_steps - len(s.steps)))
        upstream = s.moves[s.move].upstream
        mirror = ws.mirror(upstream)
        pins = dict(pairs(s.pins))
        entries = tuple(Entry(n, upstream, s.commits[i], i, mirror.commit_info(s.commits[i]).subject,
                              tuple(Pin(u, c) for u, c in {**pins, upstream: s.commits[i]}.items()))
                        for n, i in enumerate(tries, 1))
        return replace(s, rounds=s.rounds + 1), entries
    return s, ()


def take(ws: Workspace, s: Search, entries: Sequence[Entry], ran: Sequence[Ran]) -> Search:
    """The search as the round's results leave it (`ran`: one per entry, in its order); a step that could not run
    stops the search, saying where and why."""
    results: dict[int, bool] = {}
    attempts: dict[int, Attempt] = {}
    steps, flaky, stopped = list(s.steps), list(s.flaky), s.stopped
    for entry, one in zip(entries, ran, strict=True):
        if one.attempt is None:
            stopped = stopped or f"round {s.rounds}: {one.where} could not run {entry.commit[:12]}: {one.problem}"
            continue
        attempt = attempts[entry.index] = one.attempt
        steps.append(Step(upstream=entry.upstream, commit=entry.commit, subject=entry.subject, result=attempt.result,
                          seconds=one.seconds, stage=attempt.stage, summary=attempt.summary, pins=entry.onto,
                          selection=attempt.selection, round=s.rounds, where=one.where))
        flaky += [t for t in attempt.flaky if t not in flaky]
        results[entry.index] = attempt.result is not StepResult.RED
    lo, hi = kway.narrow(s.lo, s.hi, results)
    s = replace(s, lo=lo, hi=hi, steps=tuple(steps), flaky=tuple(flaky), stopped=stopped,
                red=Tried.of(attempts[hi]) if hi != s.hi else s.red,
                lock=Tried.of(attempts[lo]).lock if lo != s.lo else s.lock)
    return _close(ws, s) if stopped is not None else s


def finish(s: Search) -> tuple[Scroll, bytes | None]:
    """The Scroll of a search that is over, and the lock of the combination it proposes (None: it proposes none)."""
    bases = dict(pairs(s.bases))
    advanced = any(p.commit != bases[p.upstream] for p in s.pins)
    scroll = Scroll(spans=s.spans, steps=s.steps, last_green=s.pins, advanced=advanced, culprit=s.culprit,
                    flaky=s.flaky, complete=s.stopped is None, stopped=s.stopped, max_steps=s.max_steps,
                    budget=s.budget, seconds=round(time.time() - s.started, 3), runners=s.runners, rounds=s.rounds)
    return scroll, s.lock.encode("utf-8") if advanced and s.lock is not None else None


def stop(ws: Workspace, s: Search, why: str) -> Search:
    """The search stopped before its next round (`why`), saying how far it got."""
    return s if s.done else _close(ws, replace(s, stopped=why))


def search(ws: Workspace, ui: UI, moves: Sequence[Move], heads: Attempt, limits: Limits,
           run_round: Runner) -> tuple[Scroll, bytes | None]:
    """The whole search in this night, each round's steps run by `run_round` (this process, or local workers)."""
    s = begin(ws, moves, heads, limits)
    while True:
        s, entries = next_round(ws, s)
        if not entries:
            return finish(s)
        say_round(ui, s, entries)
        s = take(ws, s, entries, run_round([e.trial() for e in entries]))


def say_round(ui: UI, s: Search, entries: Sequence[Entry]) -> None:
    for e in entries:
        ui.note(f"scroll: round {s.rounds}: {e.upstream} {e.commit[:12]} ({e.index + 1}/{len(s.commits)}) "
                f"\"{e.subject}\"")


def _enter(ws: Workspace, s: Search) -> Search:
    """The search on the next moved upstream whose range there is (done when none is left)."""
    at_heads = {m.upstream: m.new_base for m in s.moves}
    for n in range(s.move + 1, len(s.moves)):
        move = s.moves[n]
        mirror = ws.mirror(move.upstream)
        if move.old_base == move.new_base or not mirror.is_ancestor(move.old_base, move.new_base):
            continue
        commits = tuple(mirror.first_parent_range(move.old_base, move.new_base))
        hi, red = len(commits), None
        if {**dict(pairs(s.pins)), move.upstream: move.new_base} == at_heads:  # the night ran this: red at the head
            hi, red = len(commits) - 1, s.heads
        return replace(s, move=n, commits=commits, lo=-1, hi=hi, red=red)
    return replace(s, move=len(s.moves), commits=(), lo=-1, hi=0, red=None, done=True)


def _close(ws: Workspace, s: Search) -> Search:
    """The upstream being searched closed: its span, its pin at its last green commit, its culprit; a search
    that stopped early says how far it got, and is over."""
    move = s.moves[s.move]
    commits, lo, hi = s.commits, s.lo, s.hi
    last = commits[lo] if lo >= 0 else move.old_base
    first_red = commits[hi] if hi < len(commits) and hi - lo == 1 else None
    span = Span(upstream=move.upstream, base=move.old_base, head=move.new_base, commits=len(commits),
                last_green=last, first_red=first_red)
    pins = tuple(Pin(p.upstream, last if p.upstream == move.upstream else p.commit) for p in s.pins)
    s = replace(s, spans=(*s.spans, span), pins=pins)
    if s.stopped is not None:
        left = f"{move.upstream}: green at {last[:12]}, " + (
            f"red at {commits[hi][:12]}" if hi < len(commits) else "the head not tried")
        return replace(s, stopped=f"{s.stopped}: the search got as far as {left}, {max(0, hi - lo - 1)} commit(s) "
                                  "between untried", done=True)
    if first_red is not None and s.red is not None and s.culprit is None:
        s = replace(s, culprit=_breaker(ws, move.upstream, first_red, s.red))
    return s


def _breaker(ws: Workspace, upstream: str, sha: str, red: Tried) -> Breaker:
    info = ws.mirror(upstream).commit_info(sha)
    failure = red.failure
    failing = tuple(t for s in red.suites for t in s.failing)
    return Breaker(upstream=upstream, commit=sha, subject=info.subject, author=info.author, date=info.date,
                   stage=red.stage or Stage.TEST, message=failure.message if failure else red.summary,
                   failing=failing, log_tail=failure.log_tail if failure else ())


def pairs(pins: Sequence[Pin]) -> Mapping[str, str]:
    return {p.upstream: p.commit for p in pins}
