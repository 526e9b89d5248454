"""Wheel METADATA through packaging.metadata: broken wheels are one BuildError line; the torch pin is exact."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from kpatch.errors import BuildError
from kpatch.wheels.metadata import read_wheel, require_exactly
from tests.support.wheelfiles import make_wheel


def _save(tmp_path: Path, wheel: tuple[str, bytes]) -> Path:
    path = tmp_path / wheel[0]
    path.write_bytes(wheel[1])
    return path


def test_reads_name_version_requirements_and_purity(tmp_path: Path) -> None:
    pure = read_wheel(_save(tmp_path, make_wheel("app", "1.0.post3+kpatch.a.b", requires=("vllm-xpu-kernels==1.0",))))
    assert (pure.package, str(pure.version), pure.pure) == ("app", "1.0.post3+kpatch.a.b", True)
    assert pure.requirement("VLLM_XPU_KERNELS") == Requirement("vllm-xpu-kernels==1.0")
    compiled = read_wheel(_save(tmp_path, make_wheel("vllm-xpu-kernels", "0.11.0rc1", tag="cp38-abi3-linux_x86_64")))
    assert not compiled.pure and compiled.requirement("torch") is None


def test_wheel_without_metadata_is_a_build_error(tmp_path: Path) -> None:
    path = tmp_path / "app-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("app/__init__.py", "")
    with pytest.raises(BuildError, match=r"^app-1.0-py3-none-any.whl: no .dist-info/METADATA in the wheel"):
        read_wheel(path)


def test_file_that_is_not_a_zip_is_a_build_error(tmp_path: Path) -> None:
    path = tmp_path / "app-1.0-py3-none-any.whl"
    path.write_bytes(b"not a zip")
    with pytest.raises(BuildError, match=r"^app-1.0-py3-none-any.whl: not a readable wheel"):
        read_wheel(path)


@pytest.mark.parametrize(("metadata", "problem"), [
    ("Metadata-Version: 2.1\nName: app\n\n", "version"),
    ("Metadata-Version: 2.1\nName: app\nVersion: one point oh\n\n", "one point oh"),
    ("Metadata-Version: 2.1\nName: app\nVersion: 1.0\nRequires-Dist: torch >=>= 1\n\n", "torch >=>= 1"),
])
def test_broken_metadata_is_a_build_error_naming_the_field(tmp_path: Path, metadata: str, problem: str) -> None:
    path = _save(tmp_path, make_wheel("app", "1.0", metadata=metadata))
    with pytest.raises(BuildError, match=r"^app-1.0-py3-none-any.whl: bad app-1.0.dist-info/METADATA: ") as err:
        read_wheel(path)
    assert problem in str(err.value)


def test_metadata_that_is_not_utf8_is_a_build_error(tmp_path: Path) -> None:
    name, data = make_wheel("app", "1.0", metadata=b"Metadata-Version: 2.1\nName: app\nVersion: 1.0\n\n\xff")
    with pytest.raises(BuildError, match="is not UTF-8"):
        read_wheel(_save(tmp_path, (name, data)))


def _record_ok(data: bytes) -> bool:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        record = next(n for n in archive.namelist() if n.endswith("RECORD"))
        for line in archive.read(record).decode().splitlines():
            path, digest, size = line.split(",")
            if not digest:
                continue
            content = archive.read(path)
            expected = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
            if digest != expected or int(size) != len(content):
                return False
    return True


@pytest.mark.parametrize("requires", [(), ("numpy", "torch>=2.0", "regex")])
def test_exact_torch_requirement_replaces_any_other_and_keeps_the_record_true(
        tmp_path: Path, requires: tuple[str, ...]) -> None:
    name, data = make_wheel("vllm-xpu-kernels", "1.0", tag="cp38-abi3-linux_x86_64", requires=requires,
                            files={"vllm_xpu_kernels/__init__.py": "x = 1\n"})
    pinned = require_exactly(data, name, "torch==2.14.0+xpu")
    wheel = read_wheel(_save(tmp_path, (name, pinned)))
    assert [str(r) for r in wheel.requires if r.name == "torch"] == ["torch==2.14.0+xpu"]
    assert [str(r) for r in wheel.requires if r.name != "torch"] == [r for r in requires if not r.startswith("torch")]
    assert _record_ok(pinned)
    with zipfile.ZipFile(io.BytesIO(pinned)) as after, zipfile.ZipFile(io.BytesIO(data)) as before:
        assert after.namelist() == before.namelist()
        assert after.read("vllm_xpu_kernels/__init__.py") == before.read("vllm_xpu_kernels/__init__.py")
        meta = after.read("vllm_xpu_kernels-1.0.dist-info/METADATA").decode()
        assert meta.endswith("\n\nA test wheel.\n")  # the description stays the body
