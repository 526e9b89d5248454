"""Headless Chromium for tests that look at a page as a person would (Debian's chromium and chromium-driver,
driven by selenium; scripts/browser-install installs them). Without them the test is skipped, saying so."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

INSTALL = "run scripts/browser-install (apt-get install chromium chromium-driver; pip install selenium)"


@contextmanager
def chromium(tmp_path: Path, *, javascript: bool = True) -> Iterator[Any]:
    """A headless Chromium (no sandbox: tests run as root in CI containers) that keeps the console's messages;
    `javascript=False`: with scripts off, as a person who blocks them sees a page."""
    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver_path is None:
        pytest.skip(f"chromium and chromedriver are not installed: {INSTALL}")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip(f"the selenium package is not installed: {INSTALL}")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1600", f"--user-data-dir={tmp_path / 'chromium-profile'}",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update"):
        options.add_argument(flag)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[str]:
    """The console's errors and warnings since the last call (a CSP violation or a script error is one)."""
    return [f"{entry['level']}: {entry['message']}" for entry in driver.get_log("browser")
            if entry["level"] in ("SEVERE", "WARNING")]
