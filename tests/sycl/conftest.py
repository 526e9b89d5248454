"""A real SYCL device for kernel tests: Intel's OpenCL CPU runtime from pip, and the run_kernel harness."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _sycl_prefix() -> Path:
    """The environment prefix where pip put intel-sycl-rt's headers and libraries (a venv's, else its base's)."""
    for prefix in dict.fromkeys([Path(sys.prefix), Path(sys.base_prefix)]):
        if (prefix / "include" / "sycl" / "sycl.hpp").exists() and (prefix / "lib" / "libintelocl.so").exists():
            return prefix
    pytest.fail(f"no SYCL runtime under {sys.prefix}: pip install intel-sycl-rt==2026.2.0 intel-opencl-rt==2026.2.0")


@pytest.fixture(scope="session")
def sycl_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment that makes the Intel OpenCL CPU device the default SYCL device."""
    prefix = _sycl_prefix()
    icd = tmp_path_factory.mktemp("icd")
    (icd / "intel-cpu.icd").write_text(str(prefix / "lib" / "libintelocl.so") + "\n")
    return {**os.environ, "OCL_ICD_VENDORS": str(icd)}


@pytest.fixture(scope="session")
def run_kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The harness, built with g++ against the pip SYCL headers (cached by source hash)."""
    prefix = _sycl_prefix()
    source = HERE / "run_kernel.cpp"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("KPATCH_TEST_BUILD", tmp_path_factory.getbasetemp())) / f"run_kernel-{digest}"
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["g++", "-std=c++17", "-O1", "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING", f"-I{prefix}/include",
                        str(source), f"-L{prefix}/lib", "-lsycl", f"-Wl,-rpath,{prefix}/lib", "-o", str(cache)],
                       check=True)
    return cache
