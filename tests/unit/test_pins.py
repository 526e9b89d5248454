"""Pins kpatch writes into an upstream's requirement files before the build: exact, and nothing else changed."""

from __future__ import annotations

import io
import tarfile

import pytest

from kpatch.errors import BuildError
from kpatch.wheels.pins import Pin, pin_source, pin_text

KERNELS = Pin("vllm-xpu-kernels", "0.1.13.post12+kpatch.abc", append=True)
TORCH = Pin("torch", "2.14.0", append=False)

# Shaped like vLLM v0.33.0's requirements/xpu.txt: options, an index, markers-free pins, comments.
VLLM_XPU = """# Common dependencies
-r common.txt
--extra-index-url=https://download.pytorch.org/whl/xpu
numba == 0.65.0 # needed for N-gram speculative decoding
torch==2.14.0
torchaudio
vllm_xpu_kernels==0.1.15.4
"""


def test_requirements_file_pins_the_required_wheel_and_torch_keeping_everything_else() -> None:
    text = VLLM_XPU.replace("torch==2.14.0", "torch==2.13.0+xpu  # the kernels' torch")
    pinned = pin_text("requirements/xpu.txt", text, (KERNELS, TORCH))
    assert pinned.splitlines() == [
        "# Common dependencies",
        "-r common.txt",
        "--extra-index-url=https://download.pytorch.org/whl/xpu",
        "numba == 0.65.0 # needed for N-gram speculative decoding",
        "torch==2.14.0  # the kernels' torch",
        "torchaudio",
        "vllm_xpu_kernels==0.1.13.post12+kpatch.abc",
    ]


def test_markers_and_extras_are_kept() -> None:
    text = 'torch[opt]>=2.0; sys_platform == "linux"\n'
    assert pin_text("r.txt", text, (TORCH,)) == 'torch[opt]==2.14.0; sys_platform == "linux"\n'


def test_a_missing_wheel_pin_is_appended_but_torch_is_never_added() -> None:
    pinned = pin_text("requirements.txt", "numpy\n", (KERNELS, TORCH))
    assert pinned == "numpy\nvllm-xpu-kernels==0.1.13.post12+kpatch.abc\n"


def test_torchaudio_and_a_url_requirement_are_not_torch() -> None:
    text = "torchaudio==2.14.0\n./local/torch\n"
    assert pin_text("requirements.txt", text, (TORCH,)) == text


def test_pyproject_pins_build_requires_and_dependencies_keeping_comments_and_layout() -> None:
    text = """[build-system]
# Should be mirrored in requirements/build.txt
requires = [
    "cmake>=3.26",
    "torch == 2.13.0+xpu",  # the ABI the kernels build against
    "wheel",
]

[project]
name = "vllm-xpu-kernels"
dependencies = ['torch>=2.13', "numpy"]

[project.optional-dependencies]
test = ["torch==2.13.0+xpu; python_version >= '3.10'"]
"""
    expected = (text.replace('"torch == 2.13.0+xpu"', '"torch==2.14.0"').replace("'torch>=2.13'", '"torch==2.14.0"')
                .replace("\"torch==2.13.0+xpu; python_version >= '3.10'\"",
                         '"torch==2.14.0; python_version >= \\"3.10\\""'))
    assert pin_text("pyproject.toml", text, (TORCH,)) == expected


def test_pyproject_that_is_not_toml_is_a_build_error() -> None:
    with pytest.raises(BuildError, match=r"pin file pyproject.toml: not valid TOML"):
        pin_text("pyproject.toml", "[build-system\n", (TORCH,))


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _members(tar: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_pin_source_rewrites_only_the_pin_files_in_the_archive() -> None:
    source = _tar({"src/requirements/xpu.txt": VLLM_XPU.encode(), "src/setup.py": b"print('x')\n"})
    out = _members(pin_source("vllm", source, "src/", ("requirements/xpu.txt",), (KERNELS, TORCH)))
    assert out["src/setup.py"] == b"print('x')\n"
    assert b"vllm_xpu_kernels==0.1.13.post12+kpatch.abc\n" in out["src/requirements/xpu.txt"]


def test_nothing_to_pin_leaves_the_archive_byte_identical() -> None:
    source = _tar({"src/setup.py": b"x\n"})
    assert pin_source("k", source, "src/", (), (TORCH,)) is source
    assert pin_source("k", source, "src/", ("requirements.txt",), ()) is source


def test_a_pin_file_missing_from_the_source_names_it() -> None:
    with pytest.raises(BuildError, match=r"^vllm: pin file requirements/xpu.txt is not in the source"):
        pin_source("vllm", _tar({"src/setup.py": b""}), "src/", ("requirements/xpu.txt",), (TORCH,))


def test_a_pin_file_that_is_not_utf8_names_it() -> None:
    with pytest.raises(BuildError, match=r"^vllm: pin file r.txt is not UTF-8"):
        pin_source("vllm", _tar({"src/r.txt": b"torch\xff\n"}), "src/", ("r.txt",), (TORCH,))
