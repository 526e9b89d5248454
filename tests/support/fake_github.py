"""A local, stateful fake of the GitHub REST API: what PyGithub calls for kpatch, with GitHub's failure modes.

State per repository: pull requests and issues (one number space, as on GitHub), labels, comments and branch
refs. Tokens carry read or write access: no token reads public repositories only, an unknown token gets 401, a
read token writing gets 403, a "blind" token (a fine-grained one given no repository) reads nothing through
GraphQL. POST /graphql answers the one query shape kpatch sends (Upstream-PR states: state, draft, merged, review
decision, merge commit, the head commit's check rollup, from the PRs, reviews and check runs kept here); any other
query gets a GraphQL error. `fail()` makes matching requests fail (502 twice, then fine; or after the write was
made, as a proxy that lost the reply does); `secondary_limit()` answers 403 + Retry-After; `remaining` runs the
primary rate limit down. Every answer carries the x-ratelimit headers, and every request is logged.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
Json = dict[str, Any]


@dataclass(frozen=True)
class Request:
    """One request as the fake saw it (the token by name of its access, never its value)."""

    method: str
    path: str
    query: dict[str, str]
    body: Json
    access: str  # "anonymous", "read", "write" or "bad"


@dataclass
class Fault:
    """Answer `status` to the next `times` requests matching method and path (a regex on the path)."""

    status: int
    times: int
    method: str | None = None
    path: str | None = None
    after_write: bool = False  # make the change first, then fail: the reply is lost, the write is not
    retry_after: int | None = None
    message: str = "Server Error"

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and (self.method in (None, method)) and (self.path is None or bool(
            re.search(self.path, path)))


@dataclass
class Item:
    """An issue or a pull request (GitHub numbers both from one counter)."""

    number: int
    title: str
    body: str
    user: str
    pull: bool
    state: str = "open"
    state_reason: str | None = None
    labels: list[str] = field(default_factory=list)
    comments: list[Json] = field(default_factory=list)
    head: str = ""
    base: str = ""
    merged: bool = False
    merge_commit_sha: Any = None  # anything at all: tests send `main~20`, '' and null
    head_owner: str = ""  # the owner of the head branch's repository when it is a fork ("" the repository's own)
    draft: bool = False
    pinned: bool = False  # pinned to the repository's issue list (GraphQL pinIssue; GitHub allows 3 per repository)
    reviews: list[str] = field(default_factory=list)  # review states in order: APPROVED, CHANGES_REQUESTED, ...
    checks: list[str] = field(default_factory=list)  # the head commit's check runs: success, failure, pending


@dataclass
class Repo:
    owner: str
    name: str
    private: bool = False
    items: dict[int, Item] = field(default_factory=dict)
    labels: dict[str, Json] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=lambda: {"main": "0" * 40})


class FakeGitHub:
    """The server's state; tests arrange it and read it back."""

    def __init__(self) -> None:
        self.url = ""
        self.repos: dict[str, Repo] = {}
        self.tokens: dict[str, str] = {}  # token -> "read" or "write"
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self.limit = 5000
        self.remaining = 5000
        self.reset = int(time.time()) + 3600
        self.lock = threading.Lock()
        self._ids = 1000
        self.forks: dict[str, Path] = {}  # "owner/name" -> the local bare repository standing in for that fork

    def repo(self, full: str, *, private: bool = False) -> Repo:
        """The repository `owner/name`, created when new."""
        owner, name = full.split("/")
        return self.repos.setdefault(full, Repo(owner, name, private))

    def grant(self, token: str, access: str = "write") -> None:
        self.tokens[token] = access

    def add_pull(self, full: str, number: int, *, merged: bool = False, merge_commit_sha: Any = None,
                 head: str = "topic", base: str = "main", state: str | None = None, title: str = "") -> Item:
        item = Item(number, title or f"PR {number}", "", "someone", True, state or ("closed" if merged else "open"),
                    head=head, base=base, merged=merged, merge_commit_sha=merge_commit_sha)
        self.repo(full).items[number] = item
        return item

    def review(self, full: str, number: int, state: str) -> None:
        """A review on pull request `number`: APPROVED, CHANGES_REQUESTED or COMMENTED."""
        self.repos[full].items[number].reviews.append(state)

    def check_run(self, full: str, number: int, conclusion: str) -> None:
        """A check run on the pull request's head commit: success, failure or pending (still running)."""
        self.repos[full].items[number].checks.append(conclusion)

    def merge(self, full: str, number: int, sha: Any) -> None:
        """Merge pull request `number` as commit `sha` (anything at all, as GitHub's reply may be)."""
        item = self.repos[full].items[number]
        item.state, item.merged, item.merge_commit_sha = "closed", True, sha

    def add_issue(self, full: str, title: str, *, labels: tuple[str, ...] = (), state: str = "open") -> Item:
        repo = self.repo(full)
        item = Item(self._next(repo), title, "", "someone", False, state, labels=list(labels))
        repo.items[item.number] = item
        for label in labels:
            repo.labels.setdefault(label, self._label(repo, label, "ededed", ""))
        return item

    def fail(self, status: int = 502, *, times: int = 1, method: str | None = None, path: str | None = None,
             after_write: bool = False, retry_after: int | None = None, message: str = "Server Error") -> None:
        self.faults.append(Fault(status, times, method, path, after_write, retry_after, message))

    def secondary_limit(self, *, times: int = 1, retry_after: int | None = 7) -> None:
        self.fail(403, times=times, retry_after=retry_after, message=SECONDARY)

    def fork_branch(self, fork: str, branch: str) -> str | None:
        """The commit `branch` of the fork `owner/name` points at (read with git from its bare repository), or
        None."""
        import subprocess

        folder = self.forks.get(fork)
        if folder is None:
            return None
        proc = subprocess.run(["git", "--git-dir", str(folder), "rev-parse", "--verify", "--quiet",
                               f"refs/heads/{branch}"], capture_output=True, text=True, check=False)
        return proc.stdout.strip() or None

    def items(self, full: str, *, pull: bool) -> list[Item]:
        return [i for i in self.repos[full].items.values() if i.pull == pull]

    def writes(self) -> list[Request]:
        """Requests that may change something: not GETs, nor a POST /graphql that is a query (a mutation writes)."""
        return [r for r in self.requests if r.method != "GET" and
                (r.path != "/graphql" or "mutation" in str((r.body or {}).get("query", "")))]

    def _next(self, repo: Repo) -> int:
        return max(repo.items, default=0) + 1

    def _id(self) -> int:
        self._ids += 1
        return self._ids

    def _label(self, repo: Repo, name: str, color: str, description: str) -> Json:
        return {"id": self._id(), "name": name, "color": color, "description": description, "default": False,
                "url": f"{self.url}/repos/{repo.owner}/{repo.name}/labels/{name}"}


class Answer(Exception):
    """A non-2xx answer from a route."""

    def __init__(self, status: int, message: str, errors: list[Json] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors


@contextmanager
def fake_github() -> Iterator[FakeGitHub]:
    """Serve a FakeGitHub on a loopback port for the duration of the block."""
    fake = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    from tests.support.fake_github_routes import route

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK stall between them

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            path = unquote(parts.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            upload = (self.headers.get("Content-Type") or "").startswith("application/octet-stream")
            body = {"_bytes": raw} if upload else json.loads(raw) if raw else {}  # an upload: a release asset's bytes
            with fake.lock:
                access = _access(fake, self.headers.get("Authorization"))
                fake.requests.append(Request(method, path, query, body, access))
                fault = next((f for f in fake.faults if f.matches(method, path)), None)
                if fault is not None:
                    fault.times -= 1
                status, payload, headers = self._answer(method, path, query, body, access, fault)
            self._send(status, payload, headers)

        def _answer(self, method: str, path: str, query: dict[str, str], body: Json, access: str,
                    fault: Fault | None) -> tuple[int, Any, dict[str, str]]:
            headers: dict[str, str] = {}
            if fault is not None and fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
            if fault is not None and not fault.after_write:
                return fault.status, {"message": fault.message}, headers
            if fake.remaining <= 0:
                return 403, {"message": "API rate limit exceeded for installation."}, headers
            fake.remaining -= 1
            try:
                status, payload, extra = route(fake, method, path, query, body, access)
            except Answer as answer:
                payload = {"message": answer.message, "documentation_url": "https://docs.github.com/rest"}
                if answer.errors:
                    payload["errors"] = answer.errors
                return answer.status, payload, headers
            if fault is not None:  # after_write: the change is made, the reply is lost
                return fault.status, {"message": fault.message}, headers
            return status, payload, {**headers, **extra}

        def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
            raw = isinstance(payload, bytes)  # a release asset's bytes
            data = payload if raw else b"" if status in (204, 302) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream" if raw else "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-RateLimit-Limit", str(fake.limit))
            self.send_header("X-RateLimit-Remaining", str(max(fake.remaining, 0)))
            self.send_header("X-RateLimit-Reset", str(fake.reset))
            self.send_header("X-RateLimit-Used", str(fake.limit - max(fake.remaining, 0)))
            self.send_header("X-RateLimit-Resource", "core")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def _access(fake: FakeGitHub, authorization: str | None) -> str:
    if not authorization:
        return "anonymous"
    token = authorization.split(" ", 1)[-1]
    return fake.tokens.get(token, "bad")


def page(fake: FakeGitHub, path: str, query: dict[str, str], rows: list[Json]) -> tuple[int, Any, dict[str, str]]:
    """One page of a list, with GitHub's Link header (per_page up to 100, pages from 1)."""
    per_page = min(int(query.get("per_page", 30)), 100)
    number = int(query.get("page", 1))
    chunk = rows[(number - 1) * per_page:number * per_page]
    last = max(1, -(-len(rows) // per_page))
    links = []
    for rel, target in (("next", number + 1), ("last", last)):
        if number < last:
            links.append(f'<{fake.url}{path}?{urlencode({**query, "page": target})}>; rel="{rel}"')
    return 200, chunk, ({"Link": ", ".join(links)} if links else {})
