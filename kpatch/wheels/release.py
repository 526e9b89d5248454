"""`kpatch release --to DIR`: the verified set in dist/ published into a static index, one per channel of a line.

Main's channels are DIR/<channel>/; a release line's are DIR/<line>/<channel>/ (`--line 0.33`: DIR/0.33/stable/),
so a user of one line's index never gets another line's set. Each channel folder holds:
  files/<wheel> and files/<wheel>.metadata   every wheel ever released on the channel (PEP 658 metadata beside it)
  simple/                                    the index (kpatch.wheels.index) of the releases the channel lists
  releases/<tag>/pylock.toml, NOTES.md, SHA256SUMS   each release: its lock with URLs, its notes, its sums
  releases.json                              the channel's ledger: every release, in order, and its yank

Releases are immutable: a tag, or the version of the set's top package, is released once; a wheel file of the
same name is only ever the same bytes. The ledger is written before the pages, and the pages are made from the
ledger alone, so a release interrupted between the two is finished by the next one.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tomli_w
from packaging.metadata import Metadata
from packaging.pylock import Pylock, PylockValidationError
from packaging.utils import canonicalize_name

from kpatch.config.model import MAIN, PYTORCH_XPU_INDEX, Stack
from kpatch.errors import BuildError, LockError, UsageError
from kpatch.files import LEDGER_FILE, read_input, sha256, write_atomic
from kpatch.project.exclusive import exclusive
from kpatch.wheels import index, torch_index
from kpatch.wheels import lock as lockfile
from kpatch.wheels.metadata import core_metadata
from kpatch.wheels.record import Wheel

CHANNELS = ("stable", "nightly")
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
LEDGER = "releases.json"
LOCK_FILE = ".kpatch-release.lock"  # in DIR: one release or yank at a time
LEDGER_FORMAT = 1
FILES = "files"
RELEASES = "releases"


@dataclass(frozen=True)
class ReleasedFile:
    """One wheel of a release, as the index lists it."""

    filename: str
    sha256: str
    size: int
    metadata_sha256: str
    requires_python: str | None
    href: str | None = None  # where the file is when not in files/ (a GitHub release's asset URL)


@dataclass(frozen=True)
class Release:
    """One published set on a channel."""

    tag: str
    package: str  # the set's top package (the one nothing else requires): what users ask for
    version: str
    files: tuple[ReleasedFile, ...]
    torch: str | None
    yanked: str | None = None  # why, once yanked


@dataclass(frozen=True)
class Published:
    """What `kpatch release` did: the release (or the yank), where it is, and how users install it."""

    channel: str
    line: str  # the release line whose channel it is (main, or a line of kpatch.toml)
    tag: str
    package: str
    version: str
    folder: Path  # DIR/<channel>/releases/<tag> (DIR/<line>/<channel>/... for a release line)
    index_url: str  # <base>/<channel>/simple (<base>/<line>/<channel>/simple)
    lock_url: str
    pip_command: str
    uv_command: str
    pages_written: tuple[str, ...]  # the index pages this run rewrote (the others did not change)
    listed: tuple[str, ...]  # the tags the channel's index lists now, oldest first
    left_index: tuple[str, ...]  # tags that left the index in this run ([release] keep on nightly)
    yanked: str | None
    github: str | None = None  # --to github: the GitHub release's page
    uploaded: tuple[str, ...] = ()  # --to github: the assets sent in this run (a resumed run sends what was missing)
    resumed: bool = False  # --to github: a draft or release of this set from a run that stopped was finished
    pages: str | None = None  # --to github: the index's commit, branch and remote ("unchanged ..." when it was)


@dataclass(frozen=True)
class Target:
    """Where and how a channel is published: DIR, the URL it is served at, its torch index, what it keeps, and the
    line whose channel it is (main's in DIR/<channel>/, a release line's in DIR/<line>/<channel>/)."""

    out: Path
    channel: str
    base_url: str  # DIR as users reach it (default: its file:// URL)
    torch_index: str
    keep: int | None  # None: every release stays in the index (stable)
    downloads: str | None = None  # the wheels are assets at <downloads>/<tag>/<file>, not in files/ (--to github)
    line: str = MAIN

    @property
    def path(self) -> str:
        """The channel's folder in DIR (and in its URL): <channel> for main, <line>/<channel> for a release line."""
        return channel_path(self.line, self.channel)

    @property
    def root(self) -> Path:
        return self.out / self.path

    @property
    def index_url(self) -> str:
        return f"{self.base_url.rstrip('/')}/{self.path}/{index.SIMPLE}"

    def url(self, *parts: str) -> str:
        return "/".join([self.base_url.rstrip("/"), self.path, *parts])

    def file_url(self, file: ReleasedFile) -> str:
        return file.href or self.url(FILES, file.filename)


def target(stack: Stack, out: Path, channel: str, base_url: str | None) -> Target:
    """Where `channel` of the stack's line is published in `out`, with kpatch.toml's [release] table (and
    --base-url over its url)."""
    check_names(channel, None)
    check_line(stack.line)
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--to {out}: not a folder")
    settings = stack.release
    return Target(out=out, channel=channel, base_url=base_url or settings.url or out.as_uri(),
                  torch_index=settings.torch_index or PYTORCH_XPU_INDEX,
                  keep=settings.keep if channel == "nightly" else None, line=stack.line)


def channel_path(line: str, channel: str) -> str:
    """A channel's folder in DIR: <channel> for main (as before lines), <line>/<channel> for a release line."""
    return channel if line == MAIN else f"{line}/{channel}"


def of_line(line: str, channel: str) -> str:
    """How a channel is named to a person: "stable" for main's, "stable of line 0.33" for a release line's."""
    return channel if line == MAIN else f"{channel} of line {line}"


def check_line(line: str) -> None:
    """A release line named like a channel would have its channels inside main's channel folder: refused."""
    if line in CHANNELS:
        raise UsageError(f"line {line!r} cannot be released: its channels would be DIR/{line}/<channel>/, inside "
                         f"main's {line} channel; rename the line in kpatch.toml")


def ledgers(out: Path) -> Iterator[tuple[str, str, Path]]:
    """Every channel folder of DIR that holds a ledger, as (line, channel, folder): main's, then each line's."""
    for channel in CHANNELS:
        yield MAIN, channel, out / channel
    try:
        found = sorted(p for p in out.iterdir() if p.is_dir() and p.name not in CHANNELS)
    except (FileNotFoundError, NotADirectoryError):
        return
    for folder in found:
        for channel in CHANNELS:
            if (folder / channel / LEDGER).is_file():
                yield folder.name, channel, folder / channel


def check_names(channel: str, tag: str | None) -> None:
    if channel not in CHANNELS:
        raise UsageError(f"unknown channel {channel!r} (channels: {', '.join(CHANNELS)})")
    if tag is not None and not TAG_RE.match(tag):
        raise UsageError(f"tag {tag!r}: letters, digits, '.', '_' and '-' only, starting with a letter or digit")


def default_tag(version: str) -> str:
    """The tag a release gets when none is given: v<version>, its local label joined with '-' (URL-safe)."""
    return "v" + version.replace("+", "-")


def top_wheel(lock: lockfile.Lock) -> Wheel:
    """The set's top wheel: the one whose upstream no other upstream of the lock requires (the last built)."""
    return lock.wheels[-1]


def publish(target: Target, lock_path: Path, tag: str | None, notes: str) -> Published:
    """Publish the set of `lock_path` (verified by the caller) as `tag` on the target's channel. `notes` is the
    body of the release notes (what kpatch knows of the set); the install commands are put before it.

    Everything is read and checked first (the refusals, the wheels' METADATA, torch on its index); only then is
    anything written in DIR, one writer at a time."""
    lock = lockfile.read(lock_path)
    top = top_wheel(lock)
    tag = tag or default_tag(top.version)
    check_names(target.channel, tag)
    with exclusive([target.out / LOCK_FILE], "release"):
        _refuse_released(target, lock, tag, top)
        ledger = read_ledger(target.root)
        metas = {w.filename: core_metadata(lock_path.parent / w.filename) for w in lock.wheels}
        known = {f.filename: f for old in ledger for f in old.files}
        files = tuple(known.get(w.filename) or _released(w, metas[w.filename], target, tag) for w in lock.wheels)
        torch = lock.set_torch or next((t for t in lock.torches().values() if t), None)
        release = Release(tag=tag, package=canonicalize_name(top.package), version=top.version, files=files,
                          torch=torch)
        locked = url_lock(target, lock, torch, files)
        published = _published(target, release, (), (), ())
        for wheel in lock.wheels:
            if target.downloads is None:
                _add_file(target.root / FILES, lock_path.parent / wheel.filename, wheel.sha256, metas[wheel.filename])
            else:  # the wheel is a release asset; its METADATA is kept here too (and uploaded beside it)
                write_atomic(target.root / FILES / f"{wheel.filename}.metadata", metas[wheel.filename])
        folder = target.root / RELEASES / tag
        write_atomic(folder / lockfile.LOCK_NAME, locked)
        write_atomic(folder / "SHA256SUMS", "".join(f"{f.sha256}  {f.filename}\n" for f in files).encode())
        write_atomic(folder / "NOTES.md", release_notes(published, release, notes).encode())
        ledger = [*ledger, release]
        write_ledger(target.root, ledger)
        return _reindex(target, ledger, release, before=_listed(target, ledger[:-1]))


def yank(target: Target, tag: str, why: str) -> Published:
    """Mark `tag` yanked (PEP 592) with `why`: installers skip its files unless a requirement pins them."""
    check_names(target.channel, tag)
    if not why.strip() or "\n" in why:
        raise UsageError("--why: one line saying why the set is yanked")
    with exclusive([target.out / LOCK_FILE], "release --yank"):
        ledger = read_ledger(target.root)
        found = next((r for r in ledger if r.tag == tag), None)
        if found is None:
            known = ", ".join(r.tag for r in ledger) or "none"
            raise UsageError(f"no release {tag!r} on channel {of_line(target.line, target.channel)} in {target.root} "
                             f"(released: {known})")
        if found.yanked is not None:
            raise UsageError(f"release {tag} is already yanked ({found.yanked})")
        marked = Release(tag=found.tag, package=found.package, version=found.version, files=found.files,
                         torch=found.torch, yanked=why.strip())
        ledger = [marked if r.tag == tag else r for r in ledger]
        write_ledger(target.root, ledger)
        return _reindex(target, ledger, marked, before=_listed(target, ledger))


def _refuse_released(target: Target, lock: lockfile.Lock, tag: str, top: Wheel) -> None:
    """Releases are immutable: a tag (on any channel of any line in DIR), the top package's version on this
    channel, and a wheel file name with other bytes are each released once; the error names the release that has
    it."""
    for line, channel, folder in ledgers(target.out):
        for old in read_ledger(folder):
            if old.tag == tag:
                raise UsageError(f"tag {tag} is already released on channel {of_line(line, channel)} ({old.package} "
                                 f"{old.version}, {folder / RELEASES / tag}): releases are immutable; pass another "
                                 "--tag")
    for old in read_ledger(target.root):
        if old.package == canonicalize_name(top.package) and old.version == top.version:
            raise UsageError(f"{old.package} {old.version} is already released on channel "
                             f"{of_line(target.line, target.channel)} as "
                             f"{old.tag}: releases are immutable; build a new set (kpatch build-wheels) first")
        for wheel in lock.wheels:
            same = next((f for f in old.files if f.filename == wheel.filename), None)
            if same is not None and same.sha256 != wheel.sha256:
                raise UsageError(f"{wheel.filename} is already released in {old.tag} with sha256 {same.sha256}, "
                                 f"not {wheel.sha256}: a released file never changes")


def _released(wheel: Wheel, meta: bytes, target: Target, tag: str) -> ReleasedFile:
    """The index's record of a wheel of the set: its hashes, the Requires-Python its METADATA says, and where it
    is when it is an asset of the release `tag` (--to github)."""
    parsed = Metadata.from_email(meta.decode("utf-8"), validate=False)
    requires_python = str(parsed.requires_python) if parsed.requires_python else None
    href = f"{target.downloads.rstrip('/')}/{tag}/{wheel.filename}" if target.downloads else None
    return ReleasedFile(filename=wheel.filename, sha256=wheel.sha256, size=wheel.size, metadata_sha256=sha256(meta),
                        requires_python=requires_python, href=href)


def _add_file(files: Path, wheel: Path, digest: str, meta: bytes) -> None:
    """The wheel in files/ (copied aside and renamed in, unless that very file is there) and its PEP 658 METADATA."""
    files.mkdir(parents=True, exist_ok=True)
    target = files / wheel.name
    if not (target.is_file() and target.stat().st_size == wheel.stat().st_size and sha256(target) == digest):
        staged = files / f".{wheel.name}.kpatch-new"
        try:
            shutil.copyfile(wheel, staged)
            if sha256(staged) != digest:
                raise LockError(f"{wheel}: sha256 {sha256(staged)} differs from the lock's {digest}")
            staged.replace(target)
        finally:
            staged.unlink(missing_ok=True)
    write_atomic(files / f"{wheel.name}.metadata", meta)


def _listed(target: Target, ledger: list[Release]) -> list[Release]:
    """The releases the channel's index lists: all of them, or the last `keep` (nightly)."""
    return ledger if target.keep is None else ledger[-target.keep:] if target.keep else []


def _reindex(target: Target, ledger: list[Release], release: Release, before: list[Release]) -> Published:
    listed = _listed(target, ledger)
    written = index.write(target.root, index_files(listed))
    tags = tuple(r.tag for r in listed)
    gone = tuple(r.tag for r in before if r.tag not in tags)
    return _published(target, release, tuple(written), tags, gone)


def index_files(listed: list[Release]) -> list[index.IndexFile]:
    """The files of the listed releases, each once; a file is yanked when every listed release holding it is."""
    holders: dict[str, list[Release]] = {}
    first: dict[str, ReleasedFile] = {}
    for release in listed:
        for file in release.files:
            holders.setdefault(file.filename, []).append(release)
            first.setdefault(file.filename, file)
    out = []
    for name, file in first.items():
        reasons = [r.yanked for r in holders[name]]
        yanked = None if any(r is None for r in reasons) else "; ".join(f"{r.tag}: {r.yanked}" for r in holders[name])
        out.append(index.IndexFile(filename=name, href=file.href or f"{FILES}/{name}", sha256=file.sha256,
                                   size=file.size,
                                   metadata_sha256=file.metadata_sha256, requires_python=file.requires_python,
                                   yanked=yanked))
    return out


def _published(target: Target, release: Release, written: tuple[str, ...], listed: tuple[str, ...],
               gone: tuple[str, ...]) -> Published:
    lock_url = target.url(RELEASES, release.tag, lockfile.LOCK_NAME)
    extra = f" --extra-index-url {target.torch_index}" if release.torch else ""
    return Published(channel=target.channel, line=target.line, tag=release.tag, package=release.package,
                     version=release.version,
                     folder=target.root / RELEASES / release.tag, index_url=target.index_url, lock_url=lock_url,
                     pip_command=f"pip install --index-url {target.index_url}{extra} "
                                 f"'{release.package}=={release.version}'",
                     uv_command=f"uv pip install -r {lock_url}", pages_written=written, listed=listed,
                     left_index=gone, yanked=release.yanked)


def url_lock(target: Target, lock: lockfile.Lock, torch: str | None, files: tuple[ReleasedFile, ...] = ()) -> bytes:
    """The release's PEP 751 lock: each wheel by its URL in files/ (and its size and sha256), torch named by
    version on its index as the third member when the set was built against one; validated before it is written."""
    data = lockfile.to_dict(lock)
    where = {f.filename: target.file_url(f) for f in files}
    for package, wheel in zip(data["packages"], lock.wheels, strict=True):
        url = where.get(wheel.filename) or target.url(FILES, wheel.filename)
        package["wheels"] = [{"name": wheel.filename, "url": url, "size": wheel.size,
                              "hashes": {"sha256": wheel.sha256}}]
    if torch:
        data["packages"].append({"name": "torch", "version": torch, "index": target.torch_index,
                                 "wheels": torch_index.torch_wheels(target.torch_index, torch)})
    try:
        Pylock.from_dict(data)
    except PylockValidationError as err:
        raise BuildError(f"the release lock is not a valid PEP 751 lock ({err}): a kpatch bug") from None
    return tomli_w.dumps(data).encode("utf-8")


def release_notes(published: Published, release: Release, body: str) -> str:
    """The notes: what the set is, the one install command (pip, uv), then what kpatch knows of it."""
    line = "" if published.line == MAIN else f"line {published.line}, "
    lines = [f"# {release.package} {release.version} ({line}{published.channel}, {release.tag})", "",
             "Wheels: " + ", ".join(f.filename for f in release.files) + (f"; torch {release.torch}"
                                                                           if release.torch else ""), "",
             "## Install", "", "With pip (it pulls exactly the kernels this build requires):", "", "```",
             published.pip_command, "```", "", "With uv, exactly the locked set:", "", "```", published.uv_command,
             "```", "", ""]
    return "\n".join(lines) + body


def read_ledger(root: Path) -> list[Release]:
    """The channel's releases, oldest first ([] when the channel has none yet)."""
    path = root / LEDGER
    try:
        data = json.loads(read_input(path, LEDGER_FILE, LockError))
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LockError(f"cannot read {path}: {err}") from None
    try:
        if data["format"] != LEDGER_FORMAT:
            raise ValueError(f"format {data['format']!r}, this kpatch reads {LEDGER_FORMAT}")
        return [Release(tag=r["tag"], package=r["package"], version=r["version"], torch=r["torch"],
                        yanked=r["yanked"], files=tuple(ReleasedFile(**f) for f in r["files"]))
                for r in data["releases"]]
    except (KeyError, TypeError, ValueError) as err:
        raise LockError(f"{path}: not a kpatch release ledger ({type(err).__name__}: {err})") from None


def write_ledger(root: Path, ledger: list[Release]) -> None:
    releases = [{"tag": r.tag, "package": r.package, "version": r.version, "torch": r.torch, "yanked": r.yanked,
                 "files": [{k: v for k, v in f.__dict__.items() if k != "href" or v is not None} for f in r.files]}
                for r in ledger]
    write_atomic(root / LEDGER, (json.dumps({"format": LEDGER_FORMAT, "releases": releases}, indent=1) + "\n")
                 .encode())
