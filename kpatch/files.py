"""Writing files kpatch owns or edits: atomically, keeping their mode, never through a planted symlink."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tarfile
    from concurrent.futures import Executor


class Refused(Exception):
    """A file kpatch will not read: not a regular file, or larger than its kind's bound (says which)."""


class NotAFile(Refused):
    """The path is not a regular file kpatch may read (a symlink, FIFO, device or folder): says which."""


class TooLarge(Refused):
    """A file is larger than kpatch reads (says which, and the bound)."""


@dataclass(frozen=True)
class Bound:
    """A kind of user-named file and the most kpatch reads of one: generous (a real one is far smaller), so that
    only a device, a FIFO or a runaway file is refused, before it is read."""

    what: str
    limit: int


MiB = 2**20
KPATCH_TOML = Bound("kpatch.toml", 1 * MiB)
SERIES_FILE = Bound("series file", 1 * MiB)
PATCH_FILE = Bound("patch file", 64 * MiB)
LOCK_FILE = Bound("lock", 16 * MiB)
REPORT_FILE = Bound("report", 64 * MiB)
RUN_STATE = Bound("run state", 64 * MiB)
BASELINE_FILE = Bound("baseline", 16 * MiB)
GITIGNORE = Bound(".gitignore", 1 * MiB)
HISTORY_FILE = Bound("carry history", 256 * MiB)
BUILD_FILE = Bound("build file (Dockerfile, build script)", 1 * MiB)
REQUIREMENTS_FILE = Bound("requirements file", 16 * MiB)
LEDGER_FILE = Bound("release ledger", 64 * MiB)


def read_input(path: Path, bound: Bound, error: Callable[[str], Exception], *, follow: bool = True) -> bytes:
    """The bytes of the user-named file `path`, read with `bound`: a FIFO, device, socket or folder (or, unless
    `follow`, a symlink) and a file over the bound are `error` with one line naming the file, raised before it is
    read (a FIFO is never waited on). OSErrors (a missing file, no permission) pass as they are."""
    try:
        return read_regular(path, bound.limit, follow=follow)
    except Refused as err:
        raise error(f"{err}: not a {bound.what} kpatch reads") from None


def open_regular(path: Path, *, follow: bool = False) -> BufferedReader:
    """`path` opened for reading when it is a regular file; a FIFO, device or folder (and a symlink, unless
    `follow`) is NotAFile.

    Opening never blocks (a FIFO planted where a wheel should be would wait for a writer forever).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW) | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotAFile(f"{path} is a symlink, not a regular file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket"
            raise NotAFile(f"{path} is {kind}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular(path: Path, limit: int, *, follow: bool = False) -> bytes:
    """The bytes of the regular file `path` (see `open_regular`), at most `limit` of them: a longer one (or one
    that grows past it while read) is TooLarge. A user-named file is never read without a bound."""
    with open_regular(path, follow=follow) as handle:
        size = os.fstat(handle.fileno()).st_size
        data = b"" if size > limit else handle.read(limit + 1)
    if size > limit or len(data) > limit:
        raise TooLarge(f"{path} is larger than {limit // MiB} MiB")
    return data


def sha256(source: bytes | BufferedReader | Path) -> str:
    """The hex sha256 of bytes, of an open file (read to its end) or of a regular file at a path: the one
    digest a wheel, a lock entry and a cache key are compared by."""
    import hashlib  # most commands never hash: they do not import it

    if isinstance(source, bytes):
        return hashlib.sha256(source).hexdigest()
    if isinstance(source, Path):
        with open_regular(source) as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    return hashlib.file_digest(source, "sha256").hexdigest()


def record_digest(data: bytes) -> str:
    """sha256 as a wheel's RECORD writes it (urlsafe base64, no padding)."""
    import base64
    import hashlib

    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def new_file_mode() -> int:
    """What a plain `open(..., 'w')` would give a new file: 0o666 less the umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, data: bytes, *, durable: bool = True, mode: int | None = None) -> None:
    """Write to a temp file beside `path`, then rename over it: readers see old or new, never half.

    The file keeps its previous mode (a new one gets the umask default), so kpatch never turns a user's
    0644 file into mkstemp's 0600. `durable` also fsyncs, so the file survives a power cut; run-state files
    that kpatch rewrites on the apply path skip it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = new_file_mode()
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if durable:
                os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise named(err, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def named(err: OSError, path: Path) -> OSError:
    """`err` naming `path` when it names no file (a write or fsync on a full disk names none): the error line
    then says which file could not be written."""
    if err.filename is not None:
        return err
    return type(err)(err.errno, err.strerror, str(path))


def temp_beside(path: Path) -> tuple[int, str]:
    """A new private file next to `path` (what tempfile.mkstemp makes, without importing tempfile and random)."""
    for _ in range(100):
        name = str(path.parent / f".{path.name}.{os.urandom(6).hex()}")
        try:
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {path}")


def sync_files(paths: Sequence[Path]) -> None:
    """Make `paths` durable (files, and the folders whose entries name them): an fsync each, side by side.

    Never a syncfs of the whole file system: it also writes back every other process's dirty data (a checkout,
    a docker build), so its cost grows with the machine's work, not this write's (1 s for 150 patch files beside
    a test run; scripts/bench_sync.py). Side by side, the file system commits the fsyncs together.
    """
    if not paths:
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(paths))) as pool:
        list(pool.map(fsync_file, paths))


_removals: list[threading.Thread] = []  # remove_later's threads not waited for yet
_removals_lock = threading.Lock()


def remove_later(folder: Path) -> None:
    """Remove `folder` (and all it holds) in a thread beside the rest of the command: the command has let go of
    it (renamed away, so nobody reads it). Removing files that were fsynced costs the file system a journal
    commit each (a dropped journal of 90 kept copies: 0.2 s on this 2-core machine), time the command spends on
    its report meanwhile. `removals_done` waits for it: the command's end does, and anything that would use the
    folder's name again."""
    thread = threading.Thread(target=remove_tree, args=(folder,), name=f"remove {folder.name}")
    with _removals_lock:
        _removals.append(thread)
    thread.start()


def remove_tree(folder: Path) -> None:
    """shutil.rmtree(folder, ignore_errors=True), its files unlinked side by side: removing a file that was fsynced
    waits for the file system's journal, and side by side those waits are shared (87 such files: 0.1-0.5 s one by
    one, 0.02-0.08 s eight at a time, on this machine). Like rmtree it never follows a symlink: each folder is
    opened without following one and its entries are removed relative to it; rmtree removes the folders then."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    opened: list[int] = []
    try:
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="kpatch-unlink") as pool:
            _unlink_files(pool, str(folder), None, opened)
    except OSError:
        pass  # what could not be listed: rmtree below removes it (or leaves it, as it would)
    finally:
        for fd in opened:
            os.close(fd)
    shutil.rmtree(folder, ignore_errors=True)


def _unlink_files(pool: Executor, name: str, parent: int | None, opened: list[int]) -> None:
    """Unlink (in `pool`) every file under the folder `name` (relative to the folder `parent`, None: the current
    one); the folders stay. Their descriptors go to `opened`, closed by the caller once the pool is done."""
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    opened.append(fd)
    with os.scandir(fd) as listing:
        entries = list(listing)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            _unlink_files(pool, entry.name, fd, opened)
        else:
            pool.submit(_unlink_quietly, entry.name, fd)


def _unlink_quietly(name: str, folder: int) -> None:
    with contextlib.suppress(OSError):  # gone already, or not removable: rmtree's ignore_errors
        os.unlink(name, dir_fd=folder)


def removals_done() -> None:
    """Wait for every `remove_later` of this process."""
    with _removals_lock:
        pending, _removals[:] = list(_removals), []
    for thread in pending:
        thread.join()


def fsync_file(path: Path) -> None:
    """Make one file (or a folder's entries) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def extract_tar(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract `tar` into `dest` as tarfile's "data" filter does: nothing outside `dest`, no absolute or `..`
    names, no links that leave it, no devices, no setuid bits. Pythons before 3.11.4 (Debian 12's 3.11.2) have no
    filters: there the same rules are applied here."""
    import tarfile  # the caller has loaded it: only the name is bound here (kpatch.files is imported at start-up)

    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = dest.resolve()
    safe = []
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        if Path(member.name).is_absolute() or not target.is_relative_to(root):
            raise tarfile.TarError(f"{member.name!r} would be extracted outside {dest}")
        if member.issym() or member.islnk():
            link = (target.parent / member.linkname) if member.issym() else (root / member.linkname)
            if Path(member.linkname).is_absolute() or not link.resolve().is_relative_to(root):
                raise tarfile.TarError(f"{member.name!r} links outside {dest}: {member.linkname!r}")
        elif not (member.isfile() or member.isdir()):
            raise tarfile.TarError(f"{member.name!r} is a special file (device or FIFO)")
        member.mode &= 0o777 & ~0o022 if member.isfile() else 0o777
        safe.append(member)
    tar.extractall(dest, members=safe)  # noqa: S202  # each member was checked above
