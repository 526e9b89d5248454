"""Credentials never leave kpatch: URL userinfo and registered secrets are blanked in output, logs and errors."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kpatch.errors import GitError
from kpatch.output.redact import add_secret, redact_text, redact_url
from kpatch.output.runlog import setup_logging
from kpatch.output.ui import UI


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:secret@host/x.git", "https://***@host/x.git"),
    ("https://token@host/x.git", "https://***@host/x.git"),
    ("ssh://git@host:22/x.git", "ssh://***@host:22/x.git"),
    ("https://user:p@ss@127.0.0.1:9/x.git", "https://***@127.0.0.1:9/x.git"),  # an '@' left unencoded
    ("https://host/x.git", "https://host/x.git"),
    ("https://host/path@v1", "https://host/path@v1"),  # an '@' in the path is not userinfo
    ("/srv/x.git", "/srv/x.git"),
])
def test_a_url_is_shown_without_its_userinfo(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_every_url_in_a_text_is_redacted_quoted_or_not() -> None:
    text = "fatal: unable to access 'https://u:pw1@a/x/': and \"git://u:pw2@b/y\" and https://u:pw3@c/z"
    assert redact_text(text) == "fatal: unable to access 'https://***@a/x/': and \"git://***@b/y\" and https://***@c/z"


def test_a_registered_secret_is_blanked_anywhere() -> None:
    add_secret("tok_0123456789abcdef")
    add_secret("abc")  # too short to blank safely: ignored
    assert redact_text("Authorization: token tok_0123456789abcdef; abc") == "Authorization: token ***; abc"


def test_a_git_error_never_carries_the_password() -> None:
    err = GitError(["git", "fetch", "--", "https://u:secret@h/x.git"], 128, "",
                   "fatal: could not read from 'https://u:secret@h/x.git'")
    assert "secret" not in str(err) and "https://***@h/x.git" in str(err)


def test_output_json_and_the_log_file_are_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_file = setup_logging(tmp_path / "logs", "unit")
    assert log_file is not None
    ui = UI(json_mode=True)
    url = "https://user:secret@host/x.git"
    ui.note(f"fetching from {url}")
    ui.warn(f"slow: {url}")
    ui.json({"url": url})
    ui.error(f"cannot fetch {url}", 4)
    logging.getLogger("kpatch.git").debug("git fetch -- %s", url)
    gitpython = logging.getLogger("git.cmd")
    level = gitpython.level
    gitpython.setLevel(logging.DEBUG)  # a GitPython made verbose
    gitpython.debug("Popen(['git', 'fetch', '%s'])", url)
    gitpython.setLevel(level)
    for handler in logging.getLogger("kpatch").handlers:
        handler.flush()
    out, err = capsys.readouterr()
    assert "secret" not in out + err and "secret" not in log_file.read_text()
    error = json.loads(out[out.rindex('{\n  "kpatch"'):])["error"]
    assert (error["message"], error["exit_code"], error["detail"]) == ("cannot fetch https://***@host/x.git", 4, [])
    assert log_file.read_text().count("https://***@host/x.git") == 5  # note, warning, error and two debug lines


def test_upstream_code_gets_the_allowlisted_environment_and_no_credential() -> None:
    from kpatch.procs import upstream_env

    environ = {"PATH": "/usr/bin", "LC_ALL": "C.UTF-8", "https_proxy": "http://proxy:3128",
               "PIP_INDEX_URL": "https://index.example/simple", "CMPLR_ROOT": "/opt/intel/oneapi/compiler",
               "MKLROOT": "/opt/intel/oneapi/mkl", "KPATCH_HEARTBEAT": "30", "HOME": "/root", "SHELL": "/bin/bash",
               "GITHUB_TOKEN": "ghp_x", "KPATCH_GITHUB_TOKEN": "ghp_y", "PIP_PASSWORD": "p", "SSH_AUTH_SOCK": "/s",
               "AWS_SECRET_ACCESS_KEY": "k", "KPATCH_URL_APP": "https://user:tok@host/app.git", "PYTHONPATH": "/x"}
    got = upstream_env(environ, {"VLLM_TARGET_DEVICE": "xpu", "HOME": "/tmp/build-home"})
    assert got == {"PATH": "/usr/bin", "LC_ALL": "C.UTF-8", "https_proxy": "http://proxy:3128",
                   "PIP_INDEX_URL": "https://index.example/simple", "CMPLR_ROOT": "/opt/intel/oneapi/compiler",
                   "MKLROOT": "/opt/intel/oneapi/mkl", "KPATCH_HEARTBEAT": "30", "VLLM_TARGET_DEVICE": "xpu",
                   "HOME": "/tmp/build-home"}


def test_the_value_of_every_secret_named_variable_is_blanked_in_output() -> None:
    from kpatch.output.redact import redact_text
    from kpatch.procs import register_secrets

    register_secrets({"PYPI_TOKEN": "pypi-AgEIcHlwaS5vcmc0123", "DEPLOY_KEY": "s3cr3t-deploy-key", "FLAG": "true",
                      "SHORT_TOKEN": "abc"})
    text = redact_text("token pypi-AgEIcHlwaS5vcmc0123 and s3cr3t-deploy-key; true abc")
    assert text == "token *** and ***; true abc"
