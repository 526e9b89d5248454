"""What the README says about the shipped kpatch.toml and patches/ is what they hold."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _readme() -> str:
    return " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())  # lines joined: claims wrap


def _shipped() -> dict[str, Any]:
    return tomllib.loads((ROOT / "kpatch.toml").read_text(encoding="utf-8"))


def test_the_readme_names_the_set_torch_the_shipped_kpatch_toml_sets() -> None:
    readme, torch = _readme(), _shipped().get("set", {}).get("torch")
    named = re.findall(r'`\[set\] torch = "([^"]+)"`', readme)
    assert named and set(named) == {torch}, (named, torch)
    shipped_pair = re.findall(r"The shipped pair uses torch `([^`]+)`", readme)
    assert shipped_pair == [torch]
    if torch:  # no sentence may say the shipped file has none
        assert not re.search(r"shipped `kpatch.toml` (names|has|sets) no `\[set\] torch`", readme)


def test_the_readme_lists_the_shipped_stacks_in_their_order() -> None:
    readme, upstreams = _readme(), _shipped()["upstream"]
    rows = re.findall(r"\| `patches/([^`]+)` \((first|second)", readme)
    by_requires = sorted(upstreams, key=lambda u: len(u.get("requires", [])))
    assert rows == [(Path(u["patches"]).name, order) for u, order in zip(by_requires, ("first", "second"),
                                                                         strict=True)]
    for upstream in upstreams:
        assert (ROOT / upstream["patches"] / "series").is_file()
