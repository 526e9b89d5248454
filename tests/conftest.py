"""Fixtures: real git upstreams built in temp dirs, and a kpatch project whose stacks patch them."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kpatch import git as kgit
from kpatch.cli import main

AUTHOR = {"GIT_AUTHOR_NAME": "Up Stream", "GIT_AUTHOR_EMAIL": "up@example.invalid",
          "GIT_COMMITTER_NAME": "Up Stream", "GIT_COMMITTER_EMAIL": "up@example.invalid"}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test reads or writes the real home, cache or network."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.delenv("KPATCH_CACHE_DIR", raising=False)
    for key in [k for k in os.environ if k.startswith("KPATCH_URL_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    (home / ".gitconfig").write_text("[user]\n\tname = Test User\n\temail = test@example.invalid\n"
                                     "[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n")
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and self.family != socket.AF_UNIX:
            raise AssertionError(f"test tried to reach the network: {address}")
        real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


def git(cwd: Path, *args: str, date: int = 0) -> str:
    env = {**os.environ, **AUTHOR, "GIT_AUTHOR_DATE": f"@{1_700_000_000 + date} +0000",
           "GIT_COMMITTER_DATE": f"@{1_700_000_000 + date} +0000"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def commit(repo: Path, files: dict[str, str], message: str, date: int) -> str:
    write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD")


KERNEL_FILES = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.26)\nproject(kernels)\nset(VLLM_EXT_SRC\n"
                      "  \"csrc/cache.cpp\"\n  \"csrc/layernorm.cpp\"\n  \"csrc/torch_bindings.cpp\"\n)\n",
    "csrc/ops.h": "#pragma once\n#include <torch/all.h>\n\nvoid rms_norm(torch::Tensor& out, torch::Tensor& in);\n"
                  "void concat_and_cache_mla(torch::Tensor& kv_c, torch::Tensor& k_pe);\n",
    "csrc/torch_bindings.cpp": "#include \"ops.h\"\n\nTORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n"
                               "  ops.def(\"rms_norm(Tensor! out, Tensor input) -> ()\");\n"
                               "  ops.impl(\"rms_norm\", torch::kXPU, &rms_norm);\n}\n",
    "csrc/cache.cpp": "".join(f"// cache kernel line {i}\n" for i in range(40)),
    "csrc/layernorm.cpp": "".join(f"// layernorm kernel line {i}\n" for i in range(40)),
    "vllm_xpu_kernels/__init__.py": "__version__ = '0.1.0'\n",
    "tests/test_cache.py": "def test_cache():\n    assert True\n",
}
APP_FILES = {
    "app/__init__.py": "",
    "app/platforms/xpu.py": "import vllm_xpu_kernels._C  # noqa: F401\n",
    "app/models/k3/__init__.py": "from app.platforms import current\n\nif current.is_xpu():\n"
                                 "    from .amd.linear import Linear\n    from .nvidia.model import Model\n"
                                 "else:\n    from .nvidia.model import Linear, Model\n",
    "app/models/k3/nvidia/metadata.py": "".join(f"# metadata line {i}\n" for i in range(20))
    + "def block_table(t):\n    assert t.is_cuda\n    return t\n",
    "app/models/k3/nvidia/model.py": "class Model:\n    pass\n\n\nclass Linear:\n    pass\n",
    "README.md": "app\n",
}


def make_upstream(root: Path, files: dict[str, str], churn: str, commits: int = 30) -> tuple[Path, str]:
    """A real repository with `commits` commits; returns (path, SHA of the commit used as base)."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    commit(root, files, "initial import", 0)
    base = ""
    for i in range(1, commits):
        commit(root, {churn: "".join(f"churn {j}\n" for j in range(i))}, f"churn {i}", i)
        if i == commits // 2:
            git(root, "tag", "v1.0")
            base = git(root, "rev-parse", "HEAD")
    return root, base


def make_patches(upstream: Path, base: str, folder: Path, changes: list[tuple[dict[str, str], str]]) -> list[str]:
    """Commit `changes` on a clone at `base` and write them with git format-patch (kpatch's flags) + series."""
    clone = folder.parent / f".clone-{folder.name}"
    subprocess.run(["git", "clone", "-q", str(upstream), str(clone)], check=True)
    git(clone, "checkout", "-q", "--detach", base)
    for index, (files, message) in enumerate(changes):
        commit(clone, files, message, 1000 + index)
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", *kgit.FORMAT_PATCH, "-o", str(folder), f"{base}..HEAD"], cwd=clone, check=True,
                   capture_output=True, env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    names = sorted(p.name for p in folder.glob("*.patch"))
    (folder / "series").write_text("# applied in this order\n" + "".join(f"{n}\n" for n in names))
    subprocess.run(["rm", "-rf", str(clone)], check=True)
    return names


KERNEL_CHANGES = [
    ({"csrc/kimi.cpp": "// kimi op\nvoid kimi() {}\n",
      "csrc/ops.h": KERNEL_FILES["csrc/ops.h"] + "void kimi();\n",
      "CMakeLists.txt": KERNEL_FILES["CMakeLists.txt"].replace("  \"csrc/layernorm.cpp\"\n",
                                                               "  \"csrc/kimi.cpp\"\n  \"csrc/layernorm.cpp\"\n")},
     "Add the kimi op\n\nThe XPU kernel for the fused epilogue.\n\nUpstream-Status: submitted\n"
     "Upstream-PR: vllm-project/vllm-xpu-kernels#592\n"),
    ({"tests/test_kimi.py": "def test_kimi():\n    assert 1 + 1 == 2\n"},
     "Test the kimi op\n\nUpstream-Status: pending\n"),
]
APP_CHANGES = [
    ({"app/models/k3/__init__.py": APP_FILES["app/models/k3/__init__.py"].replace(
        "    from .nvidia.model import Model\nelse", "    from .xpu.model import Model\nelse"),
      "app/models/k3/xpu/model.py": "from ..nvidia.model import Model  # ops come from the kernels\n"},
     "Route k3 to the XPU path\n\nUpstream-Status: submitted\nUpstream-PR: vllm-project/vllm#56462\n"
     "Requires: kernels/0001-Add-the-kimi-op.patch\n"),
    ({"app/models/k3/nvidia/metadata.py": APP_FILES["app/models/k3/nvidia/metadata.py"].replace(
        "t.is_cuda", "t.device.type != 'cpu'")},
     "[XPU] Make the block-table assert device-generic\n\nUpstream-Status: pending\n"),
]


@dataclass
class Project:
    root: Path
    kernels: Path
    app: Path
    kernels_base: str
    app_base: str

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    def run(self, *args: str) -> Result:
        old = Path.cwd()
        os.chdir(self.root)
        try:
            return CliRunner().invoke(main, list(args), catch_exceptions=False)
        finally:
            os.chdir(old)

    def snapshot(self) -> dict[str, str]:
        """Hash of every file in the project and worktrees (git internals excluded): 'nothing changed' checks."""
        result = {}
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and ".git" not in path.parts:
                result[str(path.relative_to(self.root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        for tree in (self.workdir / "kernels", self.workdir / "app"):
            if tree.exists():
                result[f"HEAD:{tree.name}"] = kgit.head(tree)
        return result


@pytest.fixture
def project(tmp_path: Path) -> Project:
    kernels, kbase = make_upstream(tmp_path / "upstreams" / "kernels", KERNEL_FILES, "csrc/cache_history.txt")
    app, abase = make_upstream(tmp_path / "upstreams" / "app", APP_FILES, "docs/history.txt")
    root = tmp_path / "proj"
    make_patches(kernels, kbase, root / "patches" / "kernels", KERNEL_CHANGES)
    make_patches(app, abase, root / "patches" / "app", APP_CHANGES)
    # The app comes first in the file: the order must come from `requires`, not from the file.
    (root / "kpatch.toml").write_text(f"""version = 1

[[upstream]]
name = "app"
url = "{app}"
branch = "main"
base = "v1.0"
patches = "patches/app"
requires = ["kernels"]

[[upstream]]
name = "kernels"
url = "{kernels}"
branch = "main"
base = "{kbase}"
patches = "patches/kernels"
requires = []
""")
    return Project(root=root, kernels=kernels, app=app, kernels_base=kbase, app_base=abase)
