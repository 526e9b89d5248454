"""Where `kpatch propose` pushes and opens its pull requests: the fork's URL and owner, the upstream's repository,
and the token only ever in git's environment (pure functions: no git, no GitHub)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from kpatch.adopt.propose import fork_of, repository_of
from kpatch.config.model import Propose, Upstream
from kpatch.errors import UsageError
from kpatch.forge.github.names import Repository
from kpatch.forge.hosts import push_env

TOKEN = "ghp_unitTestToken0123456789abcdefABCD"


def _upstream(url: str, propose: Propose | None = None) -> Upstream:
    return Upstream(name="vllm", url=url, branch="main", base="v1.0", base_commit=None, patches=Path("/p/vllm"),
                    requires=(), line=1, propose=propose or Propose())


def test_the_fork_is_the_upstream_url_with_the_fork_owner() -> None:
    upstream = _upstream("https://github.com/vllm-project/vllm.git")
    assert repository_of(upstream) == "vllm-project/vllm"
    assert fork_of(upstream, "vllm-project/vllm", "acme") == ("https://github.com/acme/vllm.git", "acme")
    ssh = _upstream("git@github.com:vllm-project/vllm.git")
    assert fork_of(ssh, "vllm-project/vllm", "acme") == ("git@github.com:acme/vllm.git", "acme")


def test_a_configured_fork_gives_its_owner_unless_fork_names_one() -> None:
    upstream = _upstream("https://github.com/vllm-project/vllm.git",
                         Propose(fork="https://github.com/acme/vllm-fork.git"))
    assert fork_of(upstream, "vllm-project/vllm", None) == ("https://github.com/acme/vllm-fork.git", "acme")
    assert fork_of(upstream, "vllm-project/vllm", "bob")[1] == "bob"


@pytest.mark.parametrize("fork, owner", [(None, "vllm-project"), ("https://github.com/vllm-project/vllm.git", None),
                                         ("https://github.com/vllm-project/vllm", "acme")])
def test_the_upstream_itself_is_never_the_fork(fork: str | None, owner: str | None) -> None:
    upstream = _upstream("https://github.com/vllm-project/vllm.git", Propose(fork=fork))
    with pytest.raises(UsageError, match="pushes only to a fork"):
        fork_of(upstream, "vllm-project/vllm", owner)


def test_a_path_upstream_needs_its_repository_named_and_a_fork() -> None:
    upstream = _upstream("/src/vllm")
    with pytest.raises(UsageError, match=r"\[upstream.propose\] repository"):
        repository_of(upstream)
    with pytest.raises(UsageError, match="give --fork OWNER"):
        fork_of(upstream, "vllm-project/vllm", "acme")
    named = _upstream("/src/vllm", Propose(repository=Repository("vllm-project", "vllm")))
    assert repository_of(named) == "vllm-project/vllm"


def test_the_token_goes_to_an_https_fork_as_a_header_in_the_environment_only() -> None:
    env = push_env("https://github.com/acme/vllm.git", {"GITHUB_TOKEN": TOKEN})
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraheader"
    assert TOKEN not in env["GIT_CONFIG_KEY_0"] and TOKEN not in env["GIT_CONFIG_VALUE_0"]
    sent = base64.b64decode(env["GIT_CONFIG_VALUE_0"].split()[-1]).decode()
    assert sent == f"x-access-token:{TOKEN}"
    assert push_env("git@github.com:acme/vllm.git", {"GITHUB_TOKEN": TOKEN}) == {}
    assert push_env("/srv/forks/vllm.git", {"GITHUB_TOKEN": TOKEN}) == {}
    assert push_env("https://github.com/acme/vllm.git", {}) == {}
