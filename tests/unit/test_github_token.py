"""The token never shows: not in output, logs (kpatch's, PyGithub's and urllib3's at debug), reports or errors."""

from __future__ import annotations

import base64
import importlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.forge import github
from kpatch.forge.github import Outcome, Reporter, RetryPolicy
from kpatch.output.runlog import setup_logging
from tests.support.fake_github import fake_github

TOKEN = "ghp_SECRETsecret0123456789SECRETsecret"  # a made-up value the fake server grants
WRONG = "ghp_WRONGwrong0123456789WRONGwrongxx"


def _forms(token: str) -> list[bytes]:
    """The token as it could leak: itself, and base64 as git's and HTTP's basic auth carry it."""
    return [token.encode(), base64.b64encode(f"x-access-token:{token}".encode()),
            base64.b64encode(f"{token}:x-oauth-basic".encode())]


@pytest.fixture
def debug_logs(tmp_path: Path) -> Iterator[Path]:
    """PyGithub and urllib3 log at debug level to a file, as a user with verbose logging would."""
    importlib.import_module("github")  # PyGithub sets its logger to INFO on import: import it first, then lower it
    path = tmp_path / "third-party-debug.log"
    handler = logging.FileHandler(path)
    loggers = [logging.getLogger(name) for name in ("github", "urllib3")]
    old = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    yield path
    for lg, level in zip(loggers, old, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)
    handler.close()


def test_the_token_is_in_no_file_output_or_error(tmp_path: Path, debug_logs: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log_file = setup_logging(tmp_path / "logs", "nightly")
    seen: list[str] = []
    with fake_github() as fake:
        fake.grant(TOKEN, "write")
        fake.repo("acme/stack").branches["kpatch/nightly"] = "1" * 40
        env = {"GITHUB_REPOSITORY": "acme/stack", "GITHUB_TOKEN": TOKEN, "KPATCH_GITHUB_API": fake.url}
        tgt = github.target(None, env)
        push = github.push_target(tgt)
        assert push is not None and TOKEN not in push.url and "***" not in push.url
        with Reporter(tgt, sleep=lambda s: None, retry=RetryPolicy(attempts=3)) as gh:
            fake.fail(502, times=2, method="POST")
            fake.secondary_limit(times=1, retry_after=1)
            seen += [gh.ensure_pull_request("kpatch/nightly", "main", "night", "body").message,
                     gh.report_failure("failed", "night 1").message]
            fake.fail(500, times=10, message=f"echoing {TOKEN} back")  # a server that echoes what it got
            seen.append(gh.report_failure("failed", "night 2").message)
            fake.faults.clear()
            fake.grant(TOKEN, "read")
            seen.append(gh.close_failure("passed").message)
        with Reporter(github.target(None, {**env, "GITHUB_TOKEN": WRONG})) as gh:
            denied = gh.close_failure("passed")
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        fake.add_pull("up/k", 1, merged=True, merge_commit_sha="x")
        seen.append(repr(github.check_pulls({"up/k#1"})))
        assert fake.requests[0].access == "write"  # the token really was sent
    assert denied.outcome is Outcome.DENIED and any("echoing ***" in line for line in seen)
    seen += [repr(tgt), str(tgt.token), f"{tgt.token}", repr(push), denied.message]
    (tmp_path / "report.md").write_text("\n".join(seen))  # what the nightly would put in its report
    out, err = capsys.readouterr()
    (tmp_path / "captured.txt").write_text(out + err + caplog.text)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert log_file in files and "token (oauth token removed)" in debug_logs.read_text()  # PyGithub's own mask
    leaks = [(p.name, form) for p in files for form in _forms(TOKEN) + _forms(WRONG) if form in p.read_bytes()]
    assert leaks == []


def test_the_push_target_carries_the_token_only_in_git_config_env() -> None:
    tgt = github.target(None, {"GITHUB_REPOSITORY": "acme/stack", "GITHUB_TOKEN": TOKEN})
    push = github.push_target(tgt)
    assert push is not None and push.url == "https://github.com/acme/stack.git"
    assert push.env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraheader"
    assert push.env["GIT_CONFIG_VALUE_0"] == "AUTHORIZATION: basic " + _forms(TOKEN)[1].decode()
    enterprise = github.target(None, {"GITHUB_REPOSITORY": "acme/stack", "KPATCH_GITHUB_API": "https://ghe.corp/api/v3"})
    assert github.push_target(enterprise) == github.PushTarget("https://ghe.corp/acme/stack.git", {})


def test_offline_messages_name_who_set_it_kpatch_itself_or_the_person(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo (and --scroll, the replay) set KPATCH_OFFLINE themselves: their warning says why in their words,
    never "KPATCH_OFFLINE is set", which a person reads as "I set it"; where the person did, it says that."""
    from kpatch import forge
    from kpatch.forge.github.identity import check_token
    from kpatch.forge.github.pulls import check_pulls

    monkeypatch.delenv("KPATCH_OFFLINE", raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    with forge.offline("the demo runs offline"), forge.offline("a replay runs offline"):  # nested: the outer's
        unavailable = check_pulls({"o/r#1"}).unavailable
        token = check_token(dict(os.environ)).problem
    assert unavailable is not None and unavailable.startswith("offline (the demo runs offline): ")
    assert token == "the demo runs offline: GitHub not asked"
    assert "KPATCH_OFFLINE" not in unavailable
    monkeypatch.setenv("KPATCH_OFFLINE", "1")  # the person's own
    with forge.offline("the demo runs offline"):
        assert (check_pulls({"o/r#1"}).unavailable or "").startswith("offline (KPATCH_OFFLINE is set): ")
    assert "KPATCH_OFFLINE_BY" not in os.environ  # the blocks leave nothing behind
    assert (check_pulls({"o/r#1"}).unavailable or "").startswith("offline (KPATCH_OFFLINE is set): ")
