"""The package says what it is: its license file ships, and it has authors, classifiers and project URLs."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project


def test_the_declared_license_ships_as_a_file() -> None:
    project = _project()
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert text.rstrip().endswith("END OF TERMS AND CONDITIONS")


def test_the_package_has_authors_classifiers_and_urls() -> None:
    project = _project()
    assert project["authors"] and all(author.get("name") for author in project["authors"])
    classifiers = project["classifiers"]
    assert "Programming Language :: Python :: 3 :: Only" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the SPDX expression says it
    python = project["requires-python"].removeprefix(">=")
    assert f"Programming Language :: Python :: {python}" in classifiers
    assert {"Homepage", "Source", "Issues"} <= set(project["urls"])
    assert all(url.startswith("https://") for url in project["urls"].values())
