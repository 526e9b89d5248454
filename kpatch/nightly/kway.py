"""The search's pure part: which commits of an upstream's range a round tries, and what its results leave.

The range is an upstream's first-parent commits base..head, by index: `lo` is the last index known green (-1: the
pinned base), `hi` the first known red (`size`: the head is not known yet). A round tries up to `runners` commits
at once, splitting the open range lo..hi into runners+1 parts, so C commits take about log_(runners+1)(C) rounds;
with runners = 1 it is the bisection: the head first when it is not known, then the middle.
"""

from __future__ import annotations

from collections.abc import Mapping


def plan(lo: int, hi: int, size: int, runners: int) -> tuple[int, ...]:
    """The indexes the next round tries (ascending; empty when lo and hi are neighbours: the search is over).

    When the head is not known (hi == size) it is one of them: one step settles an upstream that did not break
    the chain; the others split lo..head."""
    if runners < 1:
        raise ValueError(f"runners must be 1 or more, not {runners}")
    if not -1 <= lo < hi <= size:
        raise ValueError(f"not a range of {size} commits: {lo}..{hi}")
    if hi == size:
        if size == 0 or lo == size - 1:
            return ()
        return (*_split(lo, size - 1, runners - 1), size - 1)
    return _split(lo, hi, runners)


def _split(lo: int, hi: int, parts: int) -> tuple[int, ...]:
    """`parts` indexes strictly between lo and hi that cut it into parts+1 pieces as even as can be (all of them
    when there are no more than `parts`)."""
    gap = hi - lo
    if gap - 1 <= parts:
        return tuple(range(lo + 1, hi))
    return tuple(lo + k * gap // (parts + 1) for k in range(1, parts + 1))


def narrow(lo: int, hi: int, results: Mapping[int, bool]) -> tuple[int, int]:
    """The range a round's results leave (index -> green): the first red is the lowest red index; the last green
    the highest green one below it (a green past a red is not taken: the proposal stays before every red seen)."""
    reds = [i for i, green in results.items() if not green and lo < i < hi]
    hi = min([hi, *reds])
    greens = [i for i, green in results.items() if green and lo < i < hi]
    return max([lo, *greens]), hi
