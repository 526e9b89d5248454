"""A mirror in the shared cache is keyed by its upstream's normalised URL, never by an upstream's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.gitx.urls import mirror_folder, normalized_url, url_problem


@pytest.mark.parametrize(("one", "other"), [
    ("https://github.com/o/app.git", "https://GitHub.com/o/app/"),
    ("https://github.com/o/app", "https://x-access-token:secret@github.com/o/app.git"),
    ("git@github.com:o/app.git", "ssh://git@github.com/o/app"),
    ("file:///srv/git/app", "/srv/git/app/"),
])
def test_two_spellings_of_one_repository_share_a_mirror_folder(one: str, other: str) -> None:
    assert normalized_url(one) == normalized_url(other)
    assert mirror_folder(one) == mirror_folder(other)


@pytest.mark.parametrize(("one", "other"), [
    ("https://github.com/o/app", "https://github.com/p/app"),
    ("https://github.com/o/app", "https://gitlab.com/o/app"),
    ("/srv/git/app", "/srv/git/app.git"),  # two folders on this disk
    ("https://github.com/o/App", "https://github.com/o/app"),  # a path's case is the server's business
])
def test_two_repositories_of_one_name_never_share_a_mirror_folder(one: str, other: str) -> None:
    assert mirror_folder(one) != mirror_folder(other)
    assert mirror_folder(one).startswith(Path(one).name.removesuffix(".git") + "-")


def test_a_local_path_is_keyed_by_the_folder_it_names_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert normalized_url(str(tmp_path / "link")) == str((tmp_path / "real").resolve())


@pytest.mark.parametrize(("url", "says"), [
    ("host:-x", "its path '-x' looks like a command-line option"),
    ("-oProxyCommand=x@host:repo", "looks like a command-line option"),
    ("ssh://-oProxyCommand=touch%20x/repo", "its host '-oProxyCommand=touch%20x' looks like a command-line option"),
])
def test_a_url_whose_host_or_path_starts_with_a_dash_is_refused(url: str, says: str) -> None:
    problem = url_problem(url)
    assert problem is not None and says in problem
