"""The fake GitHub answers as GitHub does where kpatch's tests lean on it: refs, access, rate-limit headers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.support.fake_github import fake_github


def _call(url: str, method: str = "GET", token: str | None = None,
          body: object = None) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(url, method=method,  # noqa: S310 - the fake server's http://127.0.0.1 URL
                                     data=json.dumps(body).encode() if body else None)
    if token:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 - the same loopback URL
            return reply.status, dict(reply.headers), json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def test_branch_refs_and_their_404() -> None:
    with fake_github() as fake:
        fake.repo("o/r").branches["kpatch/nightly"] = "a" * 40
        found = _call(f"{fake.url}/repos/o/r/git/ref/heads/kpatch/nightly")
        missing = _call(f"{fake.url}/repos/o/r/git/ref/heads/nope")
    assert (found[0], found[2]["object"]["sha"], found[2]["ref"]) == (200, "a" * 40, "refs/heads/kpatch/nightly")
    assert (missing[0], missing[2]["message"]) == (404, "Not Found")


@pytest.mark.parametrize(("token", "access", "status", "message"), [
    (None, "anonymous", 401, "Requires authentication"), ("r", "read", 403, "Resource not accessible by integration"),
    ("nope", "bad", 401, "Bad credentials"), ("w", "write", 201, None),
])
def test_writes_need_a_write_token(token: str | None, access: str, status: int, message: str | None) -> None:
    with fake_github() as fake:
        fake.repo("o/r")
        fake.grant("r", "read")
        fake.grant("w", "write")
        code, _, body = _call(f"{fake.url}/repos/o/r/issues", "POST", token, {"title": "t"})
    assert (code, body.get("message")) == (status, message)
    assert [(r.method, r.access) for r in fake.requests] == [("POST", access)]


def test_a_private_repository_is_a_404_to_strangers_and_limits_are_counted() -> None:
    with fake_github() as fake:
        fake.repo("o/secret", private=True)
        fake.grant("w")
        stranger = _call(f"{fake.url}/repos/o/secret")
        member = _call(f"{fake.url}/repos/o/secret", token="w")
        fake.remaining = 0
        limited = _call(f"{fake.url}/repos/o/secret", token="w")
    assert stranger[0] == 404 and member[0] == 200
    assert (member[1]["X-RateLimit-Remaining"], member[1]["X-RateLimit-Used"]) == ("4998", "2")
    assert (limited[0], limited[1]["X-RateLimit-Remaining"]) == (403, "0")
    assert limited[2]["message"].startswith("API rate limit exceeded")
