"""The demo's carry history: three nights of the real nightly on the example project (this host's backend: two
nights build and test the pair), drawn as the page and looked at in headless Chromium; the screenshot is kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from kpatch.dashboard.night import Outcome
from kpatch.dashboard.report import report
from kpatch.demo.nights import REWORK_SUBJECT, simulate
from kpatch.output.ui import UI
from tests.support.browser import chromium, console_errors


def test_three_simulated_nights_give_a_history_and_a_page_with_every_point(tmp_path: Path) -> None:
    nights = simulate(tmp_path / "demo", UI(quiet=True))
    assert nights.outcomes == (Outcome.PASSED, Outcome.FAILED, Outcome.PASSED)
    done = report(nights.history, tmp_path / "site", "kpatch carry dashboard: the example project")
    board = done.board
    today = datetime.now(UTC).date()
    assert [n.date for n in (board.last_night,) if n] == [today.isoformat()] and board.nights == 3
    assert board.first == (today - timedelta(days=2)).isoformat()
    rows = {(r.upstream, r.patch.split("-")[0]): r for r in board.patches}
    first = rows["kernels", "0001"]
    assert (first.klass, first.conflicts, first.culprit_subject) == ("upstream", 1, REWORK_SUBJECT)
    assert [p.value for p in first.conflict] == [0, 1, 0] and first.size[-1].value is None  # its file is gone
    assert rows["app", "0002"].klass == "three-way"  # the recorded resolution
    assert all(r.tests == "passed" and r.nights == 3 for r in board.patches)
    assert {s.name: len(s.points) for s in board.behind} == {"kernels": 3, "app": 3}
    assert done.page is not None
    with chromium(tmp_path) as driver:
        from selenium.webdriver.common.by import By

        driver.get(done.page.as_uri())
        assert console_errors(driver) == []
        assert len(driver.find_elements(By.CSS_SELECTOR, "#behind-chart circle.pt")) == 6
        assert len(driver.find_elements(By.CSS_SELECTOR, "#stack svg.spark circle.pt")) == 4 * 3 * 2
        assert driver.find_element(By.CSS_SELECTOR, "h2").text == f"Last nightly: {today.isoformat()}, passed"
        shot = tmp_path / "dashboard.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        print(f"\nscreenshot of the demo's dashboard: {shot}")
