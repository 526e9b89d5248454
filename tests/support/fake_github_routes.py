"""The fake GitHub's endpoints: repos, pulls, issues, comments, labels and git refs, as PyGithub calls them; and
the GraphQL operations kpatch uses (POST /graphql: the Upstream-PR states query, an issue's isPinned, pinIssue)."""

from __future__ import annotations

import re
from typing import Any

from tests.support.fake_github import Answer, FakeGitHub, Item, Json, Repo, page

STAMP = "2026-11-30T00:00:00Z"
_ROUTES = [
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)", "get_repo"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/pulls", "list_pulls"),
    ("POST", r"/repos/(?P<repo>[^/]+/[^/]+)/pulls", "create_pull"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/pulls/(?P<n>\d+)", "get_pull"),
    ("PATCH", r"/repos/(?P<repo>[^/]+/[^/]+)/pulls/(?P<n>\d+)", "edit_pull"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/issues", "list_issues"),
    ("POST", r"/repos/(?P<repo>[^/]+/[^/]+)/issues", "create_issue"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<n>\d+)", "get_issue"),
    ("PATCH", r"/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<n>\d+)", "edit_issue"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<n>\d+)/comments", "list_comments"),
    ("POST", r"/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<n>\d+)/comments", "create_comment"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/labels/(?P<name>[^/]+)", "get_label"),
    ("POST", r"/repos/(?P<repo>[^/]+/[^/]+)/labels", "create_label"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/git/refs?/heads/(?P<name>.+)", "get_ref"),
]


def route(fake: FakeGitHub, method: str, path: str, query: dict[str, str], body: Json,
          access: str) -> tuple[int, Any, dict[str, str]]:
    """Dispatch one request; raises Answer for 4xx."""
    if access == "bad":
        raise Answer(401, "Bad credentials")
    if (method, path) == ("GET", "/user"):  # who the token is, and (classic tokens) its scopes in a header
        if access == "anonymous":
            raise Answer(401, "Requires authentication")
        scopes = {"write": "repo, workflow", "read": "read:user"}.get(access, "")
        return 200, {**_user(fake, "kpatch-bot"), "name": "kpatch bot"}, {"X-OAuth-Scopes": scopes}
    if (method, path) == ("POST", "/graphql"):
        return graphql(fake, body, access)
    from tests.support import fake_github_releases as releases

    for verb, pattern, name in [*_ROUTES, *releases.ROUTES]:
        match = re.fullmatch(pattern, path)
        if verb == method and match:
            repo = fake.repos.get(match["repo"])
            if repo is None or (repo.private and access not in ("read", "write")):
                raise Answer(404, "Not Found")
            if method != "GET" and access == "anonymous":
                raise Answer(401, "Requires authentication")
            if method != "GET" and access != "write":
                raise Answer(403, "Resource not accessible by integration")
            args = {k: v for k, v in match.groupdict().items() if k != "repo"}
            handler = globals().get(f"_{name}") or getattr(releases, name)
            result = handler(fake, repo, query, body, **args)
            if isinstance(result, tuple):
                return result
            return (201 if method == "POST" else 200), result, {}
    raise Answer(404, "Not Found")


def _base(fake: FakeGitHub, repo: Repo) -> str:
    return f"{fake.url}/repos/{repo.owner}/{repo.name}"


def _user(fake: FakeGitHub, login: str) -> Json:
    return {"login": login, "id": abs(hash(login)) % 100000, "type": "User", "url": f"{fake.url}/users/{login}"}


def _repo_json(fake: FakeGitHub, repo: Repo) -> Json:
    return {"id": abs(hash(repo.name)) % 100000, "name": repo.name, "full_name": f"{repo.owner}/{repo.name}",
            "owner": _user(fake, repo.owner), "private": repo.private, "default_branch": "main",
            "url": _base(fake, repo), "html_url": f"https://github.example/{repo.owner}/{repo.name}"}


def _issue_json(fake: FakeGitHub, repo: Repo, item: Item) -> Json:
    data: Json = {
        "id": item.number + 500000, "node_id": _node_id(repo, item), "number": item.number, "title": item.title,
        "body": item.body,
        "state": item.state, "state_reason": item.state_reason, "locked": False, "user": _user(fake, item.user),
        "labels": [repo.labels[name] for name in item.labels], "comments": len(item.comments),
        "created_at": STAMP, "updated_at": STAMP, "closed_at": STAMP if item.state == "closed" else None,
        "url": f"{_base(fake, repo)}/issues/{item.number}",
        "comments_url": f"{_base(fake, repo)}/issues/{item.number}/comments",
        "html_url": f"https://github.example/{repo.owner}/{repo.name}/{'pull' if item.pull else 'issues'}/"
                    f"{item.number}",  # as on GitHub: a pull request's page, even in the issues list
    }
    if item.pull:
        data["pull_request"] = {"url": f"{_base(fake, repo)}/pulls/{item.number}"}
    return data


def _pull_json(fake: FakeGitHub, repo: Repo, item: Item) -> Json:
    def side(ref: str) -> Json:
        return {"label": f"{repo.owner}:{ref}", "ref": ref, "sha": repo.branches.get(ref, "0" * 40),
                "user": _user(fake, repo.owner), "repo": _repo_json(fake, repo)}

    return {
        "id": item.number + 900000, "number": item.number, "title": item.title, "body": item.body,
        "state": item.state, "locked": False, "draft": item.draft, "user": _user(fake, item.user),
        "head": {**side(item.head), "label": f"{item.head_owner or repo.owner}:{item.head}"},
        "base": side(item.base), "merged": item.merged,
        "merge_commit_sha": item.merge_commit_sha, "merged_at": STAMP if item.merged else None,
        "created_at": STAMP, "updated_at": STAMP, "closed_at": STAMP if item.state == "closed" else None,
        "url": f"{_base(fake, repo)}/pulls/{item.number}",
        "issue_url": f"{_base(fake, repo)}/issues/{item.number}",
        "html_url": f"https://github.example/{repo.owner}/{repo.name}/pull/{item.number}",
        "comments": len(item.comments), "maintainer_can_modify": False,
    }


def _item(repo: Repo, n: str, *, pull: bool | None = None) -> Item:
    item = repo.items.get(int(n))
    if item is None or (pull is not None and item.pull != pull):
        raise Answer(404, "Not Found")
    return item


def _get_repo(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json) -> Json:
    return _repo_json(fake, repo)


def _list_pulls(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json) -> tuple[int, Any, dict[str, str]]:
    state, head, base = query.get("state", "open"), query.get("head"), query.get("base")
    rows = [_pull_json(fake, repo, i) for i in sorted(repo.items.values(), key=lambda i: -i.number)
            if i.pull and state in ("all", i.state) and (base is None or base == i.base)
            and (head is None or head == f"{i.head_owner or repo.owner}:{i.head}")]
    return page(fake, f"/repos/{repo.owner}/{repo.name}/pulls", query, rows)


def _create_pull(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json) -> Json:
    head, base = str(body.get("head", "")), str(body.get("base", ""))
    owner, _, branch = head.rpartition(":")
    owner = owner or repo.owner
    fork = fake.fork_branch(f"{owner}/{repo.name}", branch) if owner != repo.owner else None
    known = branch in repo.branches if owner == repo.owner else fork is not None
    if not body.get("title") or not known or base not in repo.branches:
        raise Answer(422, "Validation Failed", [{"resource": "PullRequest", "code": "invalid", "field": "head"}])
    if len(str(body.get("body") or "")) > 65536:
        raise Answer(422, "Validation Failed", [{"resource": "Issue", "code": "custom",
                                                 "message": "body is too long (maximum is 65536 characters)"}])
    if any(i.pull and i.state == "open" and (i.head_owner or repo.owner, i.head, i.base) == (owner, branch, base)
           for i in repo.items.values()):
        exists = f"A pull request already exists for {owner}:{branch}."
        raise Answer(422, "Validation Failed", [{"resource": "PullRequest", "code": "custom", "message": exists}])
    item = Item(fake._next(repo), body["title"], body.get("body") or "", "kpatch-bot", True, head=branch, base=base,
                head_owner="" if owner == repo.owner else owner, draft=bool(body.get("draft")))
    repo.items[item.number] = item
    return _pull_json(fake, repo, item)


def _get_pull(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, n: str) -> Json:
    return _pull_json(fake, repo, _item(repo, n, pull=True))


def _edit_pull(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, n: str) -> Json:
    item = _item(repo, n, pull=True)
    for key in ("title", "body", "state", "base"):
        if key in body:
            setattr(item, key, body[key])
    return _pull_json(fake, repo, item)


def _list_issues(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json) -> tuple[int, Any, dict[str, str]]:
    state = query.get("state", "open")
    wanted = [name for name in query.get("labels", "").split(",") if name]
    rows = [_issue_json(fake, repo, i) for i in sorted(repo.items.values(), key=lambda i: -i.number)
            if state in ("all", i.state) and all(name in i.labels for name in wanted)]
    return page(fake, f"/repos/{repo.owner}/{repo.name}/issues", query, rows)


def _create_issue(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json) -> Json:
    if not body.get("title"):
        raise Answer(422, "Validation Failed", [{"resource": "Issue", "code": "missing_field", "field": "title"}])
    labels = [str(name) for name in body.get("labels", [])]
    for name in labels:  # as on GitHub: a new label name is created on the fly
        repo.labels.setdefault(name, fake._label(repo, name, "ededed", ""))
    item = Item(fake._next(repo), body["title"], body.get("body") or "", "kpatch-bot", False, labels=labels)
    repo.items[item.number] = item
    return _issue_json(fake, repo, item)


def _get_issue(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, n: str) -> Json:
    return _issue_json(fake, repo, _item(repo, n))


def _edit_issue(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, n: str) -> Json:
    item = _item(repo, n)
    for key in ("title", "body", "state", "state_reason"):
        if key in body:
            setattr(item, key, body[key])
    if "labels" in body:
        item.labels = [str(name) for name in body["labels"]]
    return _issue_json(fake, repo, item)


def _list_comments(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json,
                   n: str) -> tuple[int, Any, dict[str, str]]:
    return page(fake, f"/repos/{repo.owner}/{repo.name}/issues/{n}/comments", query, _item(repo, n).comments)


def _create_comment(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, n: str) -> Json:
    item = _item(repo, n)
    if not body.get("body"):
        raise Answer(422, "Validation Failed", [{"resource": "IssueComment", "code": "missing_field"}])
    ident = fake._id()
    comment = {"id": ident, "body": body["body"], "user": _user(fake, "kpatch-bot"), "created_at": STAMP,
               "updated_at": STAMP, "url": f"{_base(fake, repo)}/issues/comments/{ident}",
               "issue_url": f"{_base(fake, repo)}/issues/{item.number}",
               "html_url": f"https://github.example/{repo.owner}/{repo.name}/issues/{item.number}#c{ident}"}
    item.comments.append(comment)
    return comment


def _get_label(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, name: str) -> Json:
    if name not in repo.labels:
        raise Answer(404, "Not Found")
    return repo.labels[name]


def _create_label(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json) -> Json:
    name = str(body.get("name", ""))
    if not name or name in repo.labels:
        raise Answer(422, "Validation Failed", [{"resource": "Label", "code": "already_exists", "field": "name"}])
    repo.labels[name] = fake._label(repo, name, str(body.get("color", "ededed")), str(body.get("description", "")))
    return repo.labels[name]


def _get_ref(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, name: str) -> Json:
    if name not in repo.branches:
        raise Answer(404, "Not Found")
    return {"ref": f"refs/heads/{name}", "url": f"{_base(fake, repo)}/git/refs/heads/{name}",
            "object": {"type": "commit", "sha": repo.branches[name]}}


PINNED_MAX = 3  # GitHub pins at most three issues per repository


def _node_id(repo: Repo, item: Item) -> str:
    return f"I_{repo.owner}/{repo.name}#{item.number}"


def _pin_graphql(fake: FakeGitHub, body: Json, access: str) -> tuple[int, Any, dict[str, str]]:
    """GraphQL as GitHub answers it: 401 without a token, else 200, with `errors` for what went wrong (no access,
    an unknown node, a fourth pin). Only the two operations kpatch sends are understood."""
    if access == "anonymous":
        raise Answer(401, "This endpoint requires you to be authenticated.")
    query, variables = str(body.get("query", "")), body.get("variables") or {}
    pinning = "pinIssue(" in query
    node = (variables.get("input") or {}).get("issueId") if pinning else variables.get("id")
    found = next(((repo, item) for repo in fake.repos.values() for item in repo.items.values()
                  if _node_id(repo, item) == node), None)
    if found is None:
        return 200, {"data": None, "errors": [{"type": "NOT_FOUND", "message": f"Could not resolve to a node with "
                                                                              f"the global id of '{node}'"}]}, {}
    repo, item = found
    if not pinning:
        if "isPinned" not in query:
            return 200, {"errors": [{"message": "the fake GitHub knows only isPinned and pinIssue"}]}, {}
        return 200, {"data": {"node": {"isPinned": item.pinned}}}, {}
    if access != "write":
        return 200, {"data": {"pinIssue": None}, "errors": [{"type": "FORBIDDEN", "message": "Resource not "
                                                            "accessible by integration"}]}, {}
    if not item.pinned and sum(i.pinned for i in repo.items.values()) >= PINNED_MAX:
        return 200, {"data": {"pinIssue": None}, "errors": [{"type": "UNPROCESSABLE", "message": "Repository "
                                                            "already has 3 pinned issues"}]}, {}
    item.pinned = True
    return 200, {"data": {"pinIssue": {"issue": {"id": node, "isPinned": True}}}}, {}
# The Upstream-PR states query as kpatch.forge.github.pulls builds it, and nothing else.
FIELDS = ("state isDraft merged reviewDecision mergeCommit { oid } "
          "commits(last: 1) { nodes { commit { statusCheckRollup { state } } } }")
_QUERY = re.compile(r"query\((?P<params>[^)]*)\) \{ (?P<body>.*) \}")
_PART = re.compile(r"(?P<alias>\w+): repository\(owner: \$(?P<o>\w+), name: \$(?P<n>\w+)\) "
                   r"\{ pullRequest\(number: \$(?P<p>\w+)\) \{ " + re.escape(FIELDS) + r" \} \}")


def graphql(fake: FakeGitHub, body: Json, access: str) -> tuple[int, Any, dict[str, str]]:
    """POST /graphql: 401 without a token (as on GitHub); the states query answered alias by alias (NOT_FOUND
    errors beside the data for an unknown repository or number); any other query: a GraphQL error."""
    if access == "anonymous":
        raise Answer(401, "This endpoint requires you to be authenticated.")
    text, variables = str(body.get("query", "")), body.get("variables") or {}
    if "pinIssue(" in text or "isPinned" in text:
        return _pin_graphql(fake, body, access)
    whole = _QUERY.fullmatch(text)
    parts = list(_PART.finditer(whole["body"])) if whole else []
    if whole is None or not parts or " ".join(m[0] for m in parts) != whole["body"]:
        return 200, {"errors": [{"message": "Parse error: the fake answers only kpatch's Upstream-PR query",
                                 "locations": [{"line": 1, "column": 1}]}]}, {}
    data: Json = {}
    errors: list[Json] = []
    for part in parts:
        alias = part["alias"]
        owner, name, number = (variables.get(part[k]) for k in ("o", "n", "p"))
        if not isinstance(number, int) or not isinstance(owner, str) or not isinstance(name, str):
            return 200, {"errors": [{"message": f"Variable for {alias} is missing or of the wrong type"}]}, {}
        if access == "blind":
            data[alias] = None
            errors.append({"type": "FORBIDDEN", "path": [alias],
                           "message": "Resource not accessible by personal access token"})
            continue
        repo = fake.repos.get(f"{owner}/{name}")
        if repo is None or (repo.private and access not in ("read", "write")):
            data[alias] = None
            errors.append({"type": "NOT_FOUND", "path": [alias],
                           "message": f"Could not resolve to a Repository with the name '{owner}/{name}'."})
            continue
        item = repo.items.get(number)
        if item is None or not item.pull:
            data[alias] = {"pullRequest": None}
            errors.append({"type": "NOT_FOUND", "path": [alias, "pullRequest"],
                           "message": f"Could not resolve to a PullRequest with the number of {number}."})
            continue
        data[alias] = {"pullRequest": _pull_node(item)}
    return 200, ({"data": data, "errors": errors} if errors else {"data": data}), {}


def _pull_node(item: Item) -> Json:
    decided = [r for r in item.reviews if r in ("APPROVED", "CHANGES_REQUESTED")]
    rollup = (None if not item.checks else "FAILURE" if "failure" in item.checks else
              "PENDING" if "pending" in item.checks else "SUCCESS")
    return {"state": "MERGED" if item.merged else item.state.upper(), "isDraft": item.draft, "merged": item.merged,
            "reviewDecision": decided[-1] if decided else None,
            "mergeCommit": {"oid": item.merge_commit_sha} if item.merged else None,
            "commits": {"nodes": [{"commit": {"statusCheckRollup": {"state": rollup} if rollup else None}}]}}
