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


def test_the_line_links_switch_the_stack_charts_and_numbers_between_lines_in_chromium(tmp_path: Path) -> None:
    """A page of two lines shows main's board alone; the 0.9 link shows the 0.9 line's (its stack, its chart, its
    numbers) and hides main's; each line's table sorts and filters on its own; the fragment is the choice."""
    from selenium.webdriver.common.by import By

    from kpatch.dashboard import history
    from tests.support.dashboard_data import night, patch

    main = three_nights(tmp_path / "main.jsonl")
    line = tmp_path / "line.jsonl"
    history.append(line, [night("2026-11-30", {"kernels": 2}),
                          patch("2026-11-30", "kernels", "0001-Guard.patch", lines=7, subject=HOSTILE),
                          patch("2026-11-30", "kernels", "0002-Widen.patch", lines=40)])
    done = report(main, tmp_path / "site", "dashboard", others=[("0.9", line)])
    assert done.page is not None and done.lines == ("main", "0.9")

    def shown(css: str) -> list[str]:
        return [el.get_attribute("data-patch") for el in driver.find_elements(By.CSS_SELECTOR, css)
                if el.is_displayed()]

    with chromium(tmp_path) as driver:
        driver.get(done.page.as_uri())
        assert driver.title == "dashboard" and console_errors(driver) == []
        first, second = driver.find_elements(By.CSS_SELECTOR, "section.line")
        assert first.is_displayed() and not second.is_displayed()
        assert len(shown("table.stack tbody tr")) == 3
        driver.find_element(By.LINK_TEXT, "0.9").click()
        assert not first.is_displayed() and second.is_displayed()
        assert driver.current_url.endswith("#line-2")
        assert shown("table.stack tbody tr") == ["0001-Guard.patch", "0002-Widen.patch"]
        assert "1 night(s) in the history" in second.text and "3 night(s)" not in second.text
        assert len(second.find_elements(By.CSS_SELECTOR, "#behind-chart-2 circle.pt")) == 1
        assert HOSTILE.split(">")[0] + ">" in second.text  # the hostile subject is text on this line too
        lines = second.find_element(By.XPATH, ".//table[@id='stack-2']/thead/tr/th[text()='lines']")
        lines.click()
        lines.click()
        assert shown("#stack-2 tbody tr") == ["0002-Widen.patch", "0001-Guard.patch"]
        driver.find_element(By.ID, "filter-2").send_keys("Widen")
        assert shown("#stack-2 tbody tr") == ["0002-Widen.patch"]
        assert driver.find_element(By.LINK_TEXT, "0.9").get_attribute("aria-current") == "true"
        driver.find_element(By.LINK_TEXT, "main").click()
        assert first.is_displayed() and not second.is_displayed()
        assert len(shown("#stack-1 tbody tr")) == 3  # main's rows were never filtered
        driver.get(done.page.as_uri() + "#line-2")  # a bookmarked line opens on it
        assert driver.find_element(By.ID, "line-2").is_displayed()
        assert not driver.find_element(By.ID, "line-1").is_displayed()
        assert console_errors(driver) == []


def test_without_javascript_every_line_shows_and_the_links_jump_to_them(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from kpatch.dashboard import history
    from tests.support.dashboard_data import night, patch

    main = three_nights(tmp_path / "main.jsonl")
    line = tmp_path / "line.jsonl"
    history.append(line, [night("2026-11-30", {"kernels": 2}), patch("2026-11-30", "kernels", "0001-Guard.patch")])
    done = report(main, tmp_path / "site", "dashboard", others=[("0.9", line)])
    assert done.page is not None
    with chromium(tmp_path, javascript=False) as driver:
        driver.get(done.page.as_uri())
        sections = driver.find_elements(By.CSS_SELECTOR, "section.line")
        assert [s.is_displayed() for s in sections] == [True, True]
        assert driver.find_element(By.LINK_TEXT, "0.9").get_attribute("href").endswith("#line-2")
