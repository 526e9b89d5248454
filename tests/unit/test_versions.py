"""Versions kpatch composes for the wheels it builds: PEP 440 through packaging.version, never 0.0.0 by accident."""

from __future__ import annotations

import pytest
from packaging.version import Version

from kpatch.wheels.versions import exact, from_tag, label, satisfies, with_label


@pytest.mark.parametrize(("tag", "count", "expected"), [
    ("v0.33.0", 0, "0.33.0"),
    ("v0.33.0", 12, "0.33.0.post12"),
    ("v0.11.0rc1", 0, "0.11.0rc1"),
    ("v0.11.0rc1", 3, "0.11.0rc1.post3"),
    ("0.1.13.1", 2, "0.1.13.1.post2"),
    ("v1.0.post2", 3, "1.0.post5"),
    ("v1.0.dev3", 2, "1.0.dev5"),
    ("v1.0rc1.dev3", 1, "1.0rc1.dev4"),
    ("v1.0+vendor.7", 0, "1.0"),
    ("v1!2.0", 1, "1!2.0.post1"),
])
def test_tag_and_commit_count_give_a_pep440_version(tag: str, count: int, expected: str) -> None:
    found = from_tag(tag, count)
    assert str(found.public) == expected and found.tag == tag


def test_release_candidate_tag_keeps_its_version_and_sorts_before_the_release() -> None:
    after_rc = from_tag("v0.11.0rc1", 5).public
    assert Version("0.11.0rc1") < after_rc < Version("0.11.0rc2") < Version("0.11.0")


def test_commits_after_a_dev_tag_sort_before_the_release() -> None:
    assert Version("1.0.dev3") < from_tag("v1.0.dev3", 4).public < Version("1.0")


@pytest.mark.parametrize("tag", [None, "nightly", "release-2024-01"])
def test_no_version_tag_is_reported_as_such(tag: str | None) -> None:
    found = from_tag(tag, 4)
    assert found.tag is None and str(found.public) == "0.0.0.post4"


def test_label_chains_the_required_labels_so_the_app_version_names_the_pair() -> None:
    kernels = label("a" * 64, [])
    app = label("b" * 64, [kernels])
    assert kernels == "kpatch." + "a" * 12 and app == f"kpatch.{'a' * 12}.{'b' * 12}"
    version = with_label(from_tag("v0.11.0rc1", 2).public, app)
    assert str(version) == f"0.11.0rc1.post2+{app}" and version.local == app


def test_bad_local_label_is_refused() -> None:
    with pytest.raises(ValueError, match="bad local version label"):
        with_label(Version("1.0"), "Kpatch_x")


def test_exact_pin_normalizes_name_and_version() -> None:
    assert exact("vllm_xpu_kernels", "0.1.13.POST12+kpatch.ab") == "vllm-xpu-kernels==0.1.13.post12+kpatch.ab"


@pytest.mark.parametrize(("seen", "wanted", "ok"), [
    ("2.14.0+xpu", "2.14.0", True),
    ("2.14.0", "2.14.0", True),
    ("2.14.0+xpu", "2.14.0+xpu", True),
    ("2.14.0+cpu", "2.14.0+xpu", False),
    ("2.13.0+xpu", "2.14.0", False),
    ("2.14.0rc1", "2.14.0", False),
    ("not a version", "2.14.0", False),
])
def test_torch_seen_in_a_build_against_the_set_torch(seen: str, wanted: str, ok: bool) -> None:
    assert satisfies(seen, wanted) is ok
