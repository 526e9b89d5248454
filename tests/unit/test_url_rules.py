"""Which upstream URLs kpatch fetches (an allowlist), where a refusal says it came from, and the offline hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kpatch.config import load, with_url_overrides
from kpatch.errors import ConfigError, UsageError
from kpatch.gitx import url_problem
from kpatch.gitx.urls import url_variable

ALLOWED = ["https://github.com/vllm-project/vllm.git", "HTTPS://example.com/x.git", "ssh://git@host/x.git",
           "git://host/x.git", "file:///srv/x.git", "/srv/x.git", "relative/path", "git@github.com:o/r.git",
           "https://user:token@host/x.git", "C:/repos/x", "/srv/a..b/x.git", "file:///srv/x..git",
           "git@github.com:../r.git", "https://host/a/../x.git"]  # '..' past a host is that host's business
REFUSED = {
    "--upload-pack=touch /tmp/x": "looks like a command-line option",
    "-oProxyCommand=x": "looks like a command-line option",
    "ext::sh -c touch% /tmp/x": "git remote helpers (ext::) are not allowed",
    "fd::17": "git remote helpers (fd::) are not allowed",
    "hg::https://x": "git remote helpers (hg::) are not allowed",
    "http://example.com/x.git": "URL scheme 'http' is not allowed (use https://)",
    "ftp://example.com/x.git": "URL scheme 'ftp' is not allowed",
    "": "may not be empty",
    " https://x": "may not be empty or start or end with spaces",
    "https://x\n--upload-pack=y": "may not contain control characters",
    "https://x\x7f": "may not contain control characters",
    "file:///srv/../etc/x.git": "'file:///srv/../etc/x.git' has a '..' segment",
    "file:///srv/%2e%2e/x.git": "has a '..' segment",
    "../fork": "'../fork' has a '..' segment",
    "/srv/x/..": "has a '..' segment",
    "srv\\..\\x": "has a '..' segment",
}


@pytest.mark.parametrize("url", ALLOWED)
def test_urls_of_the_allowed_kinds_pass(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize("url", sorted(REFUSED))
def test_urls_that_could_run_something_or_leak_are_refused(url: str) -> None:
    problem = url_problem(url)
    assert problem is not None and REFUSED[url] in problem


def test_a_refusal_hides_the_password_of_the_url_it_quotes() -> None:
    assert "secret" not in (url_problem("-https://user:secret@host/x") or "missing")


def _project(tmp_path: Path, url: str) -> Path:
    (tmp_path / "patches" / "vllm-xpu-kernels").mkdir(parents=True)
    toml = tmp_path / "kpatch.toml"
    toml.write_text('version = 1\n\n[[upstream]]\nname = "vllm-xpu-kernels"\nbranch = "main"\n'
                    f'url = {json.dumps(url)}\nbase = "v1"\npatches = "patches/vllm-xpu-kernels"\n')
    return toml


def test_kpatch_toml_names_file_line_and_upstream(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kpatch\.toml:6: upstream vllm-xpu-kernels: git remote helpers \(ext::\) "
                       "are not allowed"):
        load(_project(tmp_path, "ext::x"))


def test_a_url_with_a_dotdot_segment_in_kpatch_toml_is_refused_naming_upstream_and_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kpatch\.toml:6: upstream vllm-xpu-kernels: 'file:///srv/\.\./k\.git' "
                       r"has a '\.\.' segment: give the folder's absolute path"):
        load(_project(tmp_path, "file:///srv/../k.git"))


def test_an_override_names_its_source(tmp_path: Path) -> None:
    stack = load(_project(tmp_path, "https://example.com/x.git"))
    with pytest.raises(UsageError, match=r"^--url vllm-xpu-kernels: git remote helpers \(ext::\)"):
        with_url_overrides(stack, {"vllm-xpu-kernels": "ext::x"}, {})
    with pytest.raises(UsageError, match=r"^KPATCH_URL_VLLM_XPU_KERNELS vllm-xpu-kernels: .*command-line option"):
        with_url_overrides(stack, {}, {"KPATCH_URL_VLLM_XPU_KERNELS": "--upload-pack=x"})
    with pytest.raises(UsageError, match=r"^--url vllm-xpu-kernels: '/srv/\.\./k\.git' has a '\.\.' segment"):
        with_url_overrides(stack, {"vllm-xpu-kernels": "/srv/../k.git"}, {})
    moved = with_url_overrides(stack, {}, {"KPATCH_URL_VLLM_XPU_KERNELS": "/srv/k.git"})
    assert moved.upstreams[0].url == "/srv/k.git" and moved.upstreams[0].url_overridden


@pytest.mark.parametrize(("name", "variable"), [("vllm-xpu-kernels", "KPATCH_URL_VLLM_XPU_KERNELS"),
                                                ("a.b", "KPATCH_URL_A_B"), ("vllm", "KPATCH_URL_VLLM")])
def test_the_offline_hint_names_the_variable_the_override_reads(tmp_path: Path, name: str, variable: str) -> None:
    """The fetch's hint and the override use one name rule, so the hint works when followed."""
    from dataclasses import replace

    stack = load(_project(tmp_path, "https://example.com/x.git"))
    assert url_variable(name) == replace(stack.upstreams[0], name=name).env_var == variable
    moved = with_url_overrides(stack, {}, {url_variable("vllm-xpu-kernels"): "/srv/k.git"})
    assert moved.upstreams[0].url == "/srv/k.git"


def test_a_failed_ssh_fetch_says_both_why_lines_without_gits_boilerplate() -> None:
    from kpatch.gitx.mirror import fetch_failure

    stderr = ("git@github.com: Permission denied (publickey).\r\nfatal: Could not read from remote repository.\n\n"
              "Please make sure you have the correct access rights\nand the repository exists.\n")
    assert fetch_failure(stderr) == ("git@github.com: Permission denied (publickey).; "
                                     "fatal: Could not read from remote repository.")
    assert fetch_failure("Receiving objects:  45% (9/20)\rfatal: early EOF\n") == "fatal: early EOF"
    assert fetch_failure("") == "no output"
