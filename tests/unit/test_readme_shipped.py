"""What the README and docs/ say about the shipped files (kpatch.toml, patches/, the build image's default base) is
what those files hold."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from readme import DOCS, README, all_text, blocks

from kpatch.wheels.pipeline import DEFAULT_BASE_IMAGE

ROOT = Path(__file__).resolve().parents[2]


def _shipped() -> dict[str, Any]:
    return tomllib.loads((ROOT / "kpatch.toml").read_text(encoding="utf-8"))


def _series(upstream: dict[str, Any]) -> list[str]:
    lines = (ROOT / upstream["patches"] / "series").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_the_docs_name_the_set_torch_the_shipped_kpatch_toml_sets() -> None:
    text, torch = all_text(), _shipped().get("set", {}).get("torch")
    named = re.findall(r'`\[set\] torch = "([^"]+)"`', text)
    assert named and set(named) == {torch}, (named, torch)
    shipped_pair = re.findall(r"The shipped pair uses torch `([^`]+)`", text)
    assert shipped_pair == [torch]
    if torch:  # no sentence may say the shipped file has none
        assert not re.search(r"shipped `kpatch.toml` (names|has|sets) no `\[set\] torch`", text)


def test_the_readme_lists_the_shipped_stacks_in_their_order() -> None:
    text, upstreams = all_text(), _shipped()["upstream"]
    rows = re.findall(r"\| `patches/([^`]+)` \((first|second)", text)
    by_requires = sorted(upstreams, key=lambda u: len(u.get("requires", [])))
    assert rows == [(Path(u["patches"]).name, order) for u, order in zip(by_requires, ("first", "second"),
                                                                         strict=True)]
    for upstream in upstreams:
        assert (ROOT / upstream["patches"] / "series").is_file()


def test_the_patch_counts_the_docs_show_for_the_real_stacks_are_the_series_lengths() -> None:
    """`vllm  applied  4/4 patches` in a shown output: the shipped series of that upstream has 4 patches."""
    shown = re.findall(r"\b([a-z][a-z0-9._-]*)\s+applied\s+(\d+)/(\d+) patches", all_text())
    upstreams = {u["name"]: u for u in _shipped()["upstream"]}
    real = [(name, int(done), int(total)) for name, done, total in shown if name in upstreams]
    assert {name for name, _, _ in real} == set(upstreams), real  # each real stack is shown applied somewhere
    for name, done, total in real:
        assert done == total == len(_series(upstreams[name])), (name, done, total)


def test_the_default_base_image_the_docs_name_is_the_build_default() -> None:
    text = all_text()
    named = set(re.findall(r"intel/deep-learning-essentials:[\w.-]+", text))
    assert named == {DEFAULT_BASE_IMAGE}, named
    dockerfile = (ROOT / "kpatch" / "wheels" / "data" / "Dockerfile").read_text(encoding="utf-8")
    assert f"ARG BASE_IMAGE={DEFAULT_BASE_IMAGE}" in dockerfile


def _config_example() -> dict[str, Any]:
    text = (DOCS / "config.md").read_text(encoding="utf-8")
    example = next(b for b in blocks(text) if b.info == "toml" and "[[upstream]]" in b.text)
    return tomllib.loads(example.text)


@pytest.mark.parametrize("key", ["url", "branch", "base", "patches", "requires"])
def test_the_config_example_says_of_each_shipped_upstream_what_kpatch_toml_says(key: str) -> None:
    example = {u["name"]: u for u in _config_example()["upstream"]}
    shipped = {u["name"]: u for u in _shipped()["upstream"]}
    assert set(example) == set(shipped)
    for name, upstream in shipped.items():
        assert example[name].get(key, []) == upstream.get(key, []), (name, key)


def test_the_config_example_sets_the_shipped_torch() -> None:
    assert _config_example()["set"]["torch"] == _shipped()["set"]["torch"]


def test_the_docs_name_the_shipped_kernels_base_by_its_short_sha() -> None:
    """Prose such as `pinned to 2.13.0+xpu upstream at 4543b580` names the shipped kernels base."""
    kernels = next(u for u in _shipped()["upstream"] if not u.get("requires"))
    found = re.findall(r"\bat ([0-9a-f]{8})\b", all_text())
    assert found
    for short in found:
        assert kernels["base"].startswith(short), short


NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def _added(stack: str) -> str:
    """The lines the patches of a shipped stack add, joined (a registration spans lines)."""
    patches = sorted((ROOT / "patches" / stack).glob("*.patch"))
    return " ".join(line[1:].strip() for p in patches for line in p.read_text(encoding="utf-8").splitlines()
                    if line.startswith("+") and not line.startswith("+++"))


def test_the_kernels_stack_defines_and_registers_for_xpu_as_many_ops_as_the_readme_says() -> None:
    """README: vLLM calls "eight `torch.ops._C.fused_kimi_k3_mla_*` ops"; the kernels stack has "SYCL kernels for
    all eight ops, registered in `_C` under `torch::kXPU`"."""
    text = all_text()
    said = re.search(r"calls (\w+) `torch\.ops\._C\.fused_kimi_k3_mla_\*` ops", text)
    all_of = re.search(r"SYCL kernels for all (\w+) ops, registered in `_C` under `torch::kXPU`", text)
    assert said and all_of and said[1] == all_of[1]
    added = _added("vllm-xpu-kernels")
    defined = set(re.findall(r'"(fused_kimi_k3_mla_\w+)\(', added))  # a schema string: name(args) -> ...
    registered = set(re.findall(r'ops\.impl\(\s*"(fused_kimi_k3_mla_\w+)",\s*torch::kXPU', added))
    assert len(defined) == NUMBERS[said[1]], sorted(defined)
    assert registered == defined, sorted(defined - registered)


def test_every_file_the_readme_stack_table_names_is_one_its_stack_changes() -> None:
    rows = re.findall(r"^\| `patches/([^`]+)` \([^|]*\| (.*) \|$", README.read_text(encoding="utf-8"), re.MULTILINE)
    named = [(stack, path) for stack, cell in rows for path in re.findall(r"`([\w/]+\.py)`", cell)]
    assert named  # the table names files (a changed table layout would pass vacuously)
    for stack, path in named:
        changed = {line.split(" b/", 1)[1] for p in (ROOT / "patches" / stack).glob("*.patch")
                   for line in p.read_text(encoding="utf-8").splitlines() if line.startswith("diff --git ")}
        assert any(c == path or c.endswith("/" + path) for c in changed), (stack, path)
