"""`kpatch release --to github`: the set as a GitHub Release, and the channel's index on its own branch.

The release carries the wheels, their PEP 658 METADATA, the lock (wheels by their download URLs), SHA256SUMS and
the notes as assets; the index (kpatch.wheels.release's tree without files/: its links point at the assets; a
release line's channels in <line>/<channel>/ beside main's) is committed on `[release] pages-branch` (gh-pages)
and pushed to `[release] pages-remote` (the GitHub repository), where GitHub Pages serves it. The order makes a
killed run safe to run again:

  1. the release is made as a DRAFT (never public) with a marker of the set in its body;
  2. every asset is uploaded; one that is there complete is kept, one cut off is deleted and sent again;
  3. the release is PUBLISHED, the last step on GitHub: a published release has every asset;
  4. the index is pushed (with a lease).

Run again after a kill: a draft of the same set is finished from where it stopped, a draft of another set is
deleted first; a published release of the same set that the index does not list yet (killed between 3 and 4)
gets its index pushed. A published release of another set, or a git tag that is no kpatch release, is refused
naming it: releases are immutable.

`yank` marks a release of the index yanked (kpatch.wheels.release.yank on a checkout of the branch): its notes on
GitHub say so first (once; the release and its assets stay, so a lock that names them still installs), then the
branch is pushed with a lease; a run stopped between the two is finished by running it again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from kpatch import scratch
from kpatch.config.model import MAIN, PYTORCH_XPU_INDEX, Stack
from kpatch.errors import UsageError
from kpatch.forge import github
from kpatch.output.redact import redact_url
from kpatch.wheels import lock as lockfile
from kpatch.wheels import release

if TYPE_CHECKING:
    from kpatch.forge.github.releases import GitHubReleases

MARKER = "<!-- kpatch-set: {} -->"
YANKED = "> **Yanked** ({channel} channel{line}): {why}\n\n"  # {line}: "" for main, " of line 0.33" else


def set_marker(lock: lockfile.Lock) -> str:
    """The set's fingerprint in the release body: which draft or release holds exactly these wheels."""
    digest = hashlib.sha256("".join(f"{w.filename} {w.sha256}\n" for w in lock.wheels).encode()).hexdigest()
    return MARKER.format(digest[:32])


def publish(stack: Stack, environ: Mapping[str, str], channel: str, base_url: str | None, lock_path: Path,
            tag: str | None, notes: str) -> release.Published:
    """Publish the verified set of `lock_path` as a GitHub Release `tag` and its channel's index (see the module
    docstring for the order and what a second run finishes)."""
    # imported where used: PyGithub and gh-pages only for a GitHub destination
    from kpatch.forge.github.releases import GitHubReleases
    from kpatch.gitx import pages

    lock = lockfile.read(lock_path)
    top = release.top_wheel(lock)
    tag = tag or release.default_tag(top.version)
    release.check_names(channel, tag)
    release.check_line(stack.line)
    named = release.of_line(stack.line, channel)
    tgt = github.target(stack.github, environ)
    marker = set_marker(lock)
    settings = stack.release
    with GitHubReleases(tgt) as gh, scratch.folder("pages") as folder:
        remote, env = _pages_remote(stack, environ)
        tree = folder / "pages"
        parent = pages.checkout(remote, settings.pages_branch, tree, env)
        found = gh.find(tag)
        listed = any(r.tag == tag for _, _, ledger in release.ledgers(tree) for r in release.read_ledger(ledger))
        resumed = found is not None
        if found is not None and not found.draft and (marker not in found.body or listed):
            raise UsageError(f"tag {tag} is already released on GitHub ({found.url}): releases are immutable; pass "
                             "another --tag")
        if found is None and gh.tag_exists(tag):
            raise UsageError(f"tag {tag} already exists in {gh.repository} (not a release of this set): releases "
                             "are immutable; pass another --tag")
        if found is not None and found.draft and marker not in found.body:
            gh.delete(tag)  # a half-made draft of another set: never public, made again below
            found, resumed = None, False
        index_target = _index_target(stack, tree, channel, base_url, gh, tag)
        published = release.publish(index_target, lock_path, tag, notes)
        folder = published.folder
        body = (folder / "NOTES.md").read_text(encoding="utf-8") + f"\n{marker}\n"
        uploaded: list[str] = []
        state = found
        if state is None or state.draft:
            if state is None:
                state = gh.draft(tag, f"{published.package} {published.version}{_of(stack)}", body)
            assets = [(lock_path.parent / w.filename, w.filename) for w in lock.wheels]
            assets += [(index_target.root / release.FILES / f"{w.filename}.metadata", f"{w.filename}.metadata")
                       for w in lock.wheels]
            assets += [(folder / n, n) for n in (lockfile.LOCK_NAME, "SHA256SUMS", "NOTES.md")]
            for path, asset in assets:
                if gh.upload(tag, path, asset):
                    uploaded.append(asset)
            state = gh.publish(tag, body)
        (tree / ".nojekyll").touch()  # GitHub Pages serves the files as they are
        (tree / release.LOCK_FILE).unlink(missing_ok=True)  # the scratch checkout's writer lock: not published
        commit = pages.publish(tree, remote, settings.pages_branch, parent,
                               f"kpatch release {tag} on {named}\n\n{published.package} {published.version}\n", env)
    pushed = f"{commit[:12]} on {settings.pages_branch} of {redact_url(remote)}" if commit else \
        f"unchanged on {settings.pages_branch} of {redact_url(remote)}"
    return replace(published, folder=Path(index_target.path) / release.RELEASES / tag, github=state.url,
                   uploaded=tuple(uploaded), resumed=resumed, pages=pushed)


def yank(stack: Stack, environ: Mapping[str, str], channel: str, base_url: str | None, tag: str,
         why: str) -> release.Published:
    """Mark release `tag` of `channel` yanked (PEP 592) in the index on the pages branch: the ledger and the pages
    it changes (kpatch.wheels.release.yank), pushed with a lease; the GitHub release's notes get a line saying it
    is yanked first (the release and its assets stay). A tag the index does not list is refused naming it."""
    from kpatch.forge.github.releases import GitHubReleases
    from kpatch.gitx import pages

    release.check_names(channel, tag)
    release.check_line(stack.line)
    named = release.of_line(stack.line, channel)
    settings = stack.release
    with GitHubReleases(github.target(stack.github, environ)) as gh, scratch.folder("pages") as folder:
        remote, env = _pages_remote(stack, environ)
        where = f"branch {settings.pages_branch} of {redact_url(remote)}"
        tree = folder / "pages"
        parent = pages.checkout(remote, settings.pages_branch, tree, env)
        index_target = _index_target(stack, tree, channel, base_url, gh, tag)
        ledger = release.read_ledger(index_target.root)
        if not any(r.tag == tag for r in ledger):
            known = ", ".join(r.tag for r in ledger) or "none"
            raise UsageError(f"no release {tag!r} on channel {named} in the index on {where} (released: {known})")
        published = release.yank(index_target, tag, why)
        found = gh.find(tag)
        if found is not None and not found.draft:
            note = YANKED.format(channel=channel, line="" if stack.line == MAIN else f" of line {stack.line}",
                                 why=published.yanked)
            if not found.body.startswith(note):  # a run stopped before its push said so already
                found = gh.edit_notes(tag, note + found.body)
        (tree / release.LOCK_FILE).unlink(missing_ok=True)
        commit = pages.publish(tree, remote, settings.pages_branch, parent,
                               f"kpatch release --yank {tag} on {named}\n\n{published.yanked}\n", env)
    pushed = f"{commit[:12] if commit else 'unchanged'} on {where}"
    return replace(published, folder=Path(index_target.path) / release.RELEASES / tag,
                   github=found.url if found is not None else None, pages=pushed)


def _pages_remote(stack: Stack, environ: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """Where the index's branch is pushed (`[release] pages-remote`, else the repository on GitHub) and the git
    environment that carries the token there (and only there)."""
    from kpatch.forge import hosts as forge

    push = github.push_target(github.target(stack.github, environ))
    remote = stack.release.pages_remote or (push.url if push else "")
    return remote, dict(forge.push_env(remote, environ))


def _index_target(stack: Stack, tree: Path, channel: str, base_url: str | None, gh: GitHubReleases,
                  tag: str) -> release.Target:
    """The channel's index in the branch's checkout `tree`: served at `base_url`, else `[release] url`, else the
    repository's GitHub Pages; its wheels are the releases' assets."""
    settings = stack.release
    owner, name = gh.repository.split("/")
    return release.Target(out=tree, channel=channel,
                          base_url=base_url or settings.url or f"https://{owner}.github.io/{name}",
                          torch_index=settings.torch_index or PYTORCH_XPU_INDEX,
                          keep=settings.keep if channel == "nightly" else None,
                          downloads=gh.download_url(tag, "").rsplit("/", 2)[0], line=stack.line)


def _of(stack: Stack) -> str:
    """What a release's title says after the set: nothing for main, " (line 0.33)" for a release line."""
    return "" if stack.line == MAIN else f" (line {stack.line})"
