"""The one place kpatch starts a process other than git (`gitx` starts those), and what upstream code kpatch
starts on this host (a build, a test suite) may see of kpatch's own environment.

Upstream code is not kpatch's: an upstream `setup.py` or test runs with an allowlisted environment (the search
path, locale, proxy and package-index settings, the compiler toolchain's variables, `KPATCH_*`) plus what kpatch and
the upstream's `env` in kpatch.toml give it. A variable whose name marks a secret (`*TOKEN*`, `*SECRET*`,
`*PASSWORD*`, `*KEY*`, credentials) never reaches it, whatever its prefix, and its value is blanked in everything
kpatch prints, logs or posts (`register_secrets`).
"""

from __future__ import annotations

import codecs
import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kpatch.output.redact import add_secret

# A name that marks a secret: never passed to upstream code, its value blanked in output.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|KEY|AUTH_?HEADER|COOKIE", re.IGNORECASE)
_ALLOWED = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "SOURCE_DATE_EPOCH", "NO_COLOR", "FORCE_COLOR",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    # the compiler toolchain (oneAPI's setvars.sh sets these) and build parallelism
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH",
    "CMAKE_PREFIX_PATH", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAX_JOBS", "OCL_ICD_FILENAMES",
    "OCL_ICD_VENDORS",
})
_ALLOWED_PREFIXES = ("LC_", "PIP_", "UV_", "KPATCH_", "ONEAPI_", "CMPLR_", "SYCL_", "ZE_", "SCCACHE_")
_MIN_SECRET = 8  # shorter values ("1", "true") of secret-named variables would blank ordinary words


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a credential (by its name: the value is never looked at)."""
    return bool(_SECRET_NAME.search(name))


def _allowed(name: str) -> bool:
    # KPATCH_URL_<NAME> may carry credentials in its URL, and an upstream's build never needs kpatch's fetch URLs
    return (name in _ALLOWED or name.startswith(_ALLOWED_PREFIXES) or name.endswith("ROOT")) and \
        not is_secret_name(name) and not name.startswith("KPATCH_URL_")


def upstream_env(environ: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """The environment for upstream code: the allowlisted part of `environ`, then `given` (kpatch's and the
    upstream's own settings, which win)."""
    return {**{k: v for k, v in environ.items() if _allowed(k)}, **given}


def register_secrets(environ: Mapping[str, str]) -> None:
    """Blank the value of every secret-named variable in all that kpatch prints, logs, writes or posts."""
    for name, value in environ.items():
        if is_secret_name(name) and len(value) >= _MIN_SECRET:
            add_secret(value)


@dataclass(frozen=True)
class Finished:
    """How a process kpatch started ended."""

    status: int  # its exit status; 128 + N when a signal N killed it (as a shell says), 127 when it did not start
    timed_out: bool  # it had not ended at the timeout: its whole process group was killed
    output: str  # what it wrote (stderr too, unless kept apart), when not streamed to `on_output`
    errors: str = ""  # its stderr, when kept apart (`merge=False`)


def run(command: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None, timeout: float | None = None,
        on_output: Callable[[str], None] | None = None, stdin: str | None = None, merge: bool = True) -> Finished:
    """Run `command` (not git: `gitx` starts those) in a process group of its own with exactly `env`, which the
    caller builds with `upstream_env` for upstream code. Its output goes to `on_output` as it comes (raw reads: a
    hung test's id arrives without its newline and must still be seen), else into the result. It has ended when it
    exited and its output closed; when that has not happened within `timeout` seconds, or kpatch is interrupted,
    the whole group is killed. The values of secret-named variables in `env` are blanked in kpatch's output."""
    register_secrets(env)
    try:
        proc = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE, start_new_session=True)
    except OSError as err:
        return Finished(status=127, timed_out=False, output=f"{command[0]}: {err.strerror}")
    deadline = None if timeout is None else time.monotonic() + timeout
    sinks: dict[int, list[str]] = {}
    decoders = {}
    streams = [s for s in (proc.stdout, proc.stderr) if s is not None]
    for stream in streams:
        sinks[stream.fileno()] = []
        decoders[stream.fileno()] = codecs.getincrementaldecoder("utf-8")("replace")
    fds = [stream.fileno() for stream in streams]  # stdout, then stderr when kept apart
    out_fd = fds[0]
    timed_out = False
    try:
        if proc.stdin is not None:
            _feed(proc.stdin, stdin or "")
        open_fds = set(sinks)
        while open_fds:  # until every output closes, or the deadline
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                timed_out = True
                break
            ready = select.select(list(open_fds), [], [], left)[0]
            if not ready:
                timed_out = True
                break
            for fd in ready:
                chunk = os.read(fd, 65536)
                text = decoders[fd].decode(chunk, final=not chunk)
                if on_output is not None and fd == out_fd:
                    if text:
                        on_output(text)
                else:
                    sinks[fd].append(text)
                if not chunk:
                    open_fds.discard(fd)
        if not timed_out:
            try:
                proc.wait(timeout=None if deadline is None else max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        if timed_out or proc.poll() is None:
            kill_group(proc.pid)
        proc.wait()
        for stream in streams:
            stream.close()
    status = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    errors = "" if merge else "".join(sinks[fds[1]])
    return Finished(status=status, timed_out=timed_out, output="".join(sinks[out_fd]), errors=errors)


def _feed(pipe: IO[bytes], text: str) -> None:
    """Write `text` to the child's stdin from a thread of its own (a child that writes before it reads must not
    wait on kpatch), then close it."""
    def write() -> None:
        try:
            pipe.write(text.encode("utf-8"))
        except BrokenPipeError:
            pass  # it ended without reading: its status says why
        finally:
            with suppress(BrokenPipeError):
                pipe.close()

    threading.Thread(target=write, daemon=True).start()


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a process started by `run`), if any of it is left."""
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
