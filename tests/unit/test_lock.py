"""pylock.toml: written with tomli-w, validated with packaging.pylock before it is renamed in, read back as data."""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from kpatch.errors import BuildError, LockError
from kpatch.wheels.lock import LOCK_NAME, Lock, LockedUpstream, check, read, render, write
from kpatch.wheels.record import Wheel


def _lock(folder: Path | None = None) -> Lock:
    data = b"wheel bytes"
    if folder is not None:
        (folder / "a_b-1.0+kpatch.abc-cp38-abi3-linux_x86_64.whl").write_bytes(data)
    wheel = Wheel(upstream="a.b", package="A_B", version="1.0+kpatch.abc",
                  filename="a_b-1.0+kpatch.abc-cp38-abi3-linux_x86_64.whl",
                  sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    kernels = LockedUpstream(name="a.b", url="file:///up/a.b", base="0" * 40, commit="1" * 40, stack_hash="s" * 64,
                             build_key="k" * 64, command='python3 setup.py "bdist_wheel"',
                             env={"VLLM.TARGET": "xpu", "A": "1"}, torch="2.14.0+xpu")
    app = replace(kernels, name="app", env={}, torch=None)
    return Lock(wheels=(wheel,), upstreams=(kernels, app), image="kpatch-build:1", image_digest="sha256:" + "d" * 64,
                base_image="base:1", base_image_digest="", kpatch_version="0.1.0", set_torch="2.14.0")


def test_dotted_upstream_name_and_env_key_stay_single_keys(tmp_path: Path) -> None:
    path = write(tmp_path, _lock(tmp_path))
    data = tomllib.loads(path.read_text())
    upstreams = data["tool"]["kpatch"]["upstreams"]
    assert set(upstreams) == {"a.b", "app"}
    assert upstreams["a.b"]["env"] == {"VLLM.TARGET": "xpu", "A": "1"}
    assert data["packages"][0]["name"] == "a-b"  # PEP 751 wants the normalized name


def test_lock_reads_back_with_per_wheel_torch(tmp_path: Path) -> None:
    lock = read(write(tmp_path, _lock(tmp_path)))
    assert lock.torches() == {"a.b": "2.14.0+xpu", "app": None}
    assert lock.torch("a.b") == "2.14.0+xpu" and lock.set_torch == "2.14.0"
    assert lock.wheels[0].package == "a-b" and lock.upstreams[0].command == 'python3 setup.py "bdist_wheel"'
    assert 'torch = "none"' in (tmp_path / LOCK_NAME).read_text()


def test_same_lock_gives_the_same_bytes(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    reordered = replace(lock, upstreams=tuple(replace(u, env=dict(reversed(list(u.env.items()))))
                                              for u in lock.upstreams))
    assert list(reordered.upstreams[0].env) != list(lock.upstreams[0].env)  # the same env, in another order
    path = write(tmp_path, lock)
    assert path.read_bytes() == render(reordered) == render(read(path))


def test_invalid_lock_is_refused_before_it_replaces_the_old_one(tmp_path: Path) -> None:
    tmp_path = tmp_path / "dist"
    tmp_path.mkdir()
    good = write(tmp_path, _lock(tmp_path))
    before = good.read_bytes()
    bad = replace(_lock(), wheels=(replace(_lock().wheels[0], version="one point oh"),))
    with pytest.raises(LockError, match=r"not a valid PEP 751 lock: Invalid version: 'one point oh'"):
        write(tmp_path, bad)
    assert good.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([LOCK_NAME, _lock().wheels[0].filename])


def test_unwritable_folder_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="cannot write"):
        write(tmp_path / "missing", _lock())


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace('lock-version = "1.0"', 'lock-version = "2.0"'), "pylock version 2.0 is not supported"),
    (lambda t: t.replace("format = 1", "format = 7"), "format 7, this kpatch reads format 1"),
    (lambda t: t.replace('torch = "2.14.0+xpu"', 'torch = "two"'), "bad [tool.kpatch] table"),
    (lambda t: t.replace("[tool.kpatch]", "[tool.other]"), "bad [tool.kpatch] table"),
    (lambda t: t + "\n[[packages\n", "not valid TOML"),
])
def test_bad_lock_is_one_line_naming_the_file(tmp_path: Path, edit: object, message: str) -> None:
    path = write(tmp_path, _lock(tmp_path))
    path.write_text(edit(path.read_text()))  # type: ignore[operator]
    with pytest.raises(LockError) as err:
        read(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


def test_check_finds_a_missing_or_changed_wheel(tmp_path: Path) -> None:
    path = write(tmp_path, _lock(tmp_path))
    wheel = tmp_path / _lock().wheels[0].filename
    assert check(path) == []
    wheel.write_bytes(b"wheel bytez")
    assert check(path) == [f"{wheel.name}: sha256 differs"]
    wheel.unlink()
    assert check(path) == [f"{wheel.name}: missing"]


def test_a_new_lock_gets_the_umask_mode_and_a_rewritten_one_keeps_its_own(tmp_path: Path) -> None:
    """mkstemp stages the lock 0600: the lock itself is made like any file (dist/pylock.toml was 0600)."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        path = write(tmp_path, _lock(tmp_path))
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o640)
        write(tmp_path, _lock(tmp_path))
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    finally:
        os.umask(old)
