"""The dashboard page in headless Chromium, as a person sees it: it loads with no console error, a hostile subject
stays text, clicking a header reorders the rows, the filter hides rows, every chart has a point per record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kpatch.dashboard.report import report
from tests.support.browser import chromium, console_errors
from tests.support.dashboard_data import HOSTILE, three_nights


def _column(driver: Any, index: int) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "#stack tbody tr")
    return [r.find_elements(By.TAG_NAME, "td")[index].text for r in rows if r.is_displayed()]


def test_the_page_loads_sorts_filters_and_draws_every_point_in_chromium(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    source = three_nights(tmp_path / "history.jsonl")
    done = report(source, tmp_path / "site", "dashboard")
    assert done.page is not None
    with chromium(tmp_path) as driver:
        driver.get(done.page.as_uri())
        assert driver.title == "dashboard"  # the hostile subject's script and onerror did not run
        assert console_errors(driver) == []
        assert HOSTILE.split(">")[0] + ">" in driver.find_element(By.ID, "stack").text  # shown as text
        assert _column(driver, 7) == ["3", "20", "200"]  # the summary's order: by upstream, then patch name
        assert _column(driver, 5) == ["0", "0", "0"]  # changed (churn): no night recorded a range-diff change
        conflicts = driver.find_element(By.XPATH, "//table[@id='stack']/thead/tr/th[text()='conflicts']")
        conflicts.click()
        assert _column(driver, 4) == ["0", "0", "1"] and _column(driver, 7) == ["3", "200", "20"]
        assert conflicts.get_attribute("aria-sort") == "ascending"
        lines = driver.find_element(By.XPATH, "//table[@id='stack']/thead/tr/th[text()='lines']")
        lines.click()
        lines.click()
        assert _column(driver, 7) == ["200", "20", "3"] and lines.get_attribute("aria-sort") == "descending"
        assert conflicts.get_attribute("aria-sort") is None
        driver.find_element(By.ID, "filter").send_keys("three-way")
        assert _column(driver, 1) == ["0002-Tune.patch"]
        behind = driver.find_elements(By.CSS_SELECTOR, "#behind-chart circle.pt")
        assert len(behind) == sum(len(n.behind) for n in _nights(source)) == 6
        for row in done.board.patches:
            for kind in ("size", "conflicts"):
                points = driver.find_elements(
                    By.CSS_SELECTOR, f'tr[data-patch="{row.patch}"] svg.spark-{kind} circle.pt')
                assert len(points) == row.nights == 3
        assert console_errors(driver) == []


def _nights(source: Path) -> list[Any]:
    from kpatch.dashboard import history

    return list(history.read(source).nights)
