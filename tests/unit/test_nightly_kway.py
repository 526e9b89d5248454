"""The k-way search's pure part (kpatch/nightly/kway.py): which commits a round tries, and what its results leave."""

from __future__ import annotations

import math

import pytest

from kpatch.nightly.kway import narrow, plan


def _search(size: int, first_red: int | None, runners: int, head_known: bool = True) -> tuple[int, int, int, int]:
    """The whole search on a range whose commits from `first_red` on are red (None: all green): (last green,
    first red, rounds, steps)."""
    lo, hi = -1, size
    if head_known and first_red is not None:
        hi = size - 1
    rounds = steps = 0
    while tries := plan(lo, hi, size, runners):
        assert len(tries) <= runners and all(lo < t < hi for t in tries) and list(tries) == sorted(set(tries))
        rounds, steps = rounds + 1, steps + len(tries)
        lo, hi = narrow(lo, hi, {t: first_red is None or t < first_red for t in tries})
    return lo, hi, rounds, steps


def _bisection(size: int, first_red: int) -> list[int]:
    """Today's bisection from the red head, as scroll.search did it before runners: the middle each time."""
    lo, hi, tried = -1, size - 1, []
    while hi - lo > 1:
        mid = (lo + hi) // 2
        tried.append(mid)
        lo, hi = (lo, mid) if mid >= first_red else (mid, hi)
    return tried


@pytest.mark.parametrize("size", [1, 2, 5, 8, 13, 64])
def test_one_runner_tries_exactly_the_commits_of_the_bisection(size: int) -> None:
    for first_red in range(size):
        lo, hi, tried = -1, size - 1, []
        while rounds := plan(lo, hi, size, 1):
            (mid,) = rounds
            tried.append(mid)
            lo, hi = narrow(lo, hi, {mid: mid < first_red})
        assert tried == _bisection(size, first_red)


def test_one_runner_tries_the_head_first_when_it_is_not_known() -> None:
    assert plan(-1, 5, 5, 1) == (4,)
    assert narrow(-1, 5, {4: True}) == (4, 5) and plan(4, 5, 5, 1) == ()  # a green head: the search is over


def test_a_round_splits_the_range_into_runners_plus_one_parts() -> None:
    assert plan(-1, 63, 64, 3) == (15, 31, 47)
    assert plan(-1, 63, 64, 7) == (7, 15, 23, 31, 39, 47, 55)
    assert plan(3, 6, 64, 7) == (4, 5)  # fewer commits left than runners: all of them


def test_with_the_head_unknown_the_head_is_one_of_the_round_and_the_others_split_below_it() -> None:
    assert plan(-1, 10, 10, 3) == (2, 5, 9)


@pytest.mark.parametrize("runners", [1, 2, 3, 7])
def test_every_runner_count_finds_the_same_last_green_and_first_red(runners: int) -> None:
    for size in (1, 2, 3, 9, 17, 64):
        for first_red in [None, *range(size)]:
            for head_known in (True, False):
                lo, hi, _, _ = _search(size, first_red, runners, head_known)
                want = (size - 1, size) if first_red is None else (first_red - 1, first_red)
                assert (lo, hi) == want, (size, first_red, runners, head_known)


def test_the_planted_break_at_45_of_64_takes_log_base_runners_plus_one_rounds() -> None:
    found = {n: _search(64, 44, n) for n in (1, 3, 7)}  # commit 45 of 64 is index 44
    assert {n: (lo, hi) for n, (lo, hi, _, _) in found.items()} == {1: (43, 44), 3: (43, 44), 7: (43, 44)}
    rounds = {n: r for n, (_, _, r, _) in found.items()}
    assert rounds == {1: 6, 3: 3, 7: 2}
    assert all(r <= math.ceil(math.log(63, n + 1)) for n, r in rounds.items())


def test_narrow_takes_the_lowest_red_and_the_last_green_below_it() -> None:
    assert narrow(-1, 20, {4: True, 9: False, 14: True}) == (4, 9)  # green past a red: not taken
    assert narrow(-1, 20, {4: False, 9: False}) == (-1, 4)
    assert narrow(4, 9, {}) == (4, 9)


@pytest.mark.parametrize(("lo", "hi", "size", "runners"), [(-1, 5, 5, 0), (3, 3, 5, 1), (-2, 4, 5, 1), (1, 6, 5, 1)])
def test_a_range_that_is_none_is_refused(lo: int, hi: int, size: int, runners: int) -> None:
    with pytest.raises(ValueError):
        plan(lo, hi, size, runners)
