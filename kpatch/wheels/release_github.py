"""`kpatch release --to github`: the set as a GitHub Release, and the channel's index on its own branch.

The release carries the wheels, their PEP 658 METADATA, the lock (wheels by their download URLs), SHA256SUMS and
the notes as assets; the index (kpatch.wheels.release's tree without files/: its links point at the assets) is
committed on `[release] pages-branch` (gh-pages) and pushed to `[release] pages-remote` (the GitHub repository),
where GitHub Pages serves it. The order makes a killed run safe to run again:

  1. the release is made as a DRAFT (never public) with a marker of the set in its body;
  2. every asset is uploaded; one that is there complete is kept, one cut off is deleted and sent again;
  3. the release is PUBLISHED, the last step on GitHub: a published release has every asset;
  4. the index is pushed (with a lease).

Run again after a kill: a draft of the same set is finished from where it stopped, a draft of another set is
deleted first; a published release of the same set that the index does not list yet (killed between 3 and 4)
gets its index pushed. A published release of another set, or a git tag that is no kpatch release, is refused
naming it: releases are immutable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from kpatch import scratch
from kpatch.config.model import PYTORCH_XPU_INDEX, Stack
from kpatch.errors import UsageError
from kpatch.output.redact import redact_url
from kpatch.wheels import lock as lockfile
from kpatch.wheels import release

MARKER = "<!-- kpatch-set: {} -->"


def set_marker(lock: lockfile.Lock) -> str:
    """The set's fingerprint in the release body: which draft or release holds exactly these wheels."""
    digest = hashlib.sha256("".join(f"{w.filename} {w.sha256}\n" for w in lock.wheels).encode()).hexdigest()
    return MARKER.format(digest[:32])


def publish(stack: Stack, environ: Mapping[str, str], channel: str, base_url: str | None, lock_path: Path,
            tag: str | None, notes: str) -> release.Published:
    """Publish the verified set of `lock_path` as a GitHub Release `tag` and its channel's index (see the module
    docstring for the order and what a second run finishes)."""
    from kpatch.forge import github
    from kpatch.forge import hosts as forge
    from kpatch.forge.github.releases import GitHubReleases
    from kpatch.gitx import pages

    lock = lockfile.read(lock_path)
    top = release.top_wheel(lock)
    tag = tag or release.default_tag(top.version)
    release.check_names(channel, tag)
    tgt = github.target(stack.github, environ)
    marker = set_marker(lock)
    settings = stack.release
    with GitHubReleases(tgt) as gh, scratch.folder("pages") as folder:
        push = github.push_target(tgt)
        remote = settings.pages_remote or (push.url if push else "")
        env = forge.push_env(remote, environ)
        tree = folder / "pages"
        parent = pages.checkout(remote, settings.pages_branch, tree, env)
        found = gh.find(tag)
        listed = any(r.tag == tag for ch in release.CHANNELS for r in release.read_ledger(tree / ch))
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
        owner, name = str(tgt.repository).split("/")
        target = release.Target(out=tree, channel=channel,
                                base_url=base_url or settings.url or f"https://{owner}.github.io/{name}",
                                torch_index=settings.torch_index or PYTORCH_XPU_INDEX,
                                keep=settings.keep if channel == "nightly" else None,
                                downloads=gh.download_url(tag, "").rsplit("/", 2)[0])
        published = release.publish(target, lock_path, tag, notes)
        folder = published.folder
        body = (folder / "NOTES.md").read_text(encoding="utf-8") + f"\n{marker}\n"
        uploaded: list[str] = []
        state = found
        if state is None or state.draft:
            if state is None:
                state = gh.draft(tag, f"{published.package} {published.version}", body)
            assets = [(lock_path.parent / w.filename, w.filename) for w in lock.wheels]
            assets += [(tree / channel / release.FILES / f"{w.filename}.metadata", f"{w.filename}.metadata")
                       for w in lock.wheels]
            assets += [(folder / n, n) for n in (lockfile.LOCK_NAME, "SHA256SUMS", "NOTES.md")]
            for path, asset in assets:
                if gh.upload(tag, path, asset):
                    uploaded.append(asset)
            state = gh.publish(tag, body)
        (tree / ".nojekyll").touch()  # GitHub Pages serves the files as they are
        commit = pages.publish(tree, remote, settings.pages_branch, parent,
                               f"kpatch release {tag} on {channel}\n\n{published.package} {published.version}\n", env)
    pushed = f"{commit[:12]} on {settings.pages_branch} of {redact_url(remote)}" if commit else \
        f"unchanged on {settings.pages_branch} of {redact_url(remote)}"
    return replace(published, folder=Path(channel) / release.RELEASES / tag, github=state.url,
                   uploaded=tuple(uploaded), resumed=resumed, pages=pushed)
