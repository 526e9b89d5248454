"""Example upstreams kpatch generates itself: a kernels-like and an app-like repository with patch stacks.

Used by `kpatch demo` and by the tests; every repository is a real git repository with a real history.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from kpatch.gitx import FORMAT_PATCH, out, run

AUTHOR = ("Up Stream", "up@example.invalid")
PATCH_AUTHOR = ("kpatch developers", "dev@kpatch.invalid")
EPOCH = 1_700_000_000
Change = tuple[dict[str, str], str]  # files to write, commit message

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
    # CRLF line ends, as some real upstream files have (vLLM's vllm/config/fault_tolerance.py): a patch to it
    # must keep its CRs through apply and export.
    "csrc/kernels.ini": "; which kernels are built\r\n[kernels]\r\nkimi = off\r\nrms_norm = on\r\n",
    "tests/test_cache.py": "def test_cache():\n    assert True\n",
    # Built like the real kernels (setup.py bdist_wheel, an abi3 platform wheel) but in a second.
    "setup.py": "import os\nfrom setuptools import Distribution, setup\n\n\n"
                "class Binary(Distribution):\n    def has_ext_modules(self):\n        return True\n\n\n"
                "setup(name='vllm-xpu-kernels', version=os.environ.get('SETUPTOOLS_SCM_PRETEND_VERSION', '0.0.0'),\n"
                "      packages=['vllm_xpu_kernels'], distclass=Binary)\n",
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
    "requirements/xpu.txt": "vllm-xpu-kernels==0.1.0\n",
    "setup.py": "import os\nfrom setuptools import find_namespace_packages, setup\n\n"
                "with open('requirements/xpu.txt') as f:\n"
                "    requires = [line.strip() for line in f if line.strip() and not line.startswith('#')]\n\n"
                "setup(name='app', version=os.environ.get('SETUPTOOLS_SCM_PRETEND_VERSION', '0.0.0'),\n"
                "      packages=find_namespace_packages(include=['app', 'app.*']), install_requires=requires)\n",
}
KERNEL_CHANGES: list[Change] = [
    ({"csrc/kimi.cpp": "// kimi op\nvoid kimi() {}\n",
      "csrc/ops.h": KERNEL_FILES["csrc/ops.h"] + "void kimi();\n",
      "csrc/kernels.ini": KERNEL_FILES["csrc/kernels.ini"].replace("kimi = off", "kimi = on"),
      "CMakeLists.txt": KERNEL_FILES["CMakeLists.txt"].replace("  \"csrc/layernorm.cpp\"\n",
                                                               "  \"csrc/kimi.cpp\"\n  \"csrc/layernorm.cpp\"\n")},
     "Add the kimi op\n\nThe XPU kernel for the fused epilogue.\n\nUpstream-Status: submitted\n"
     "Upstream-PR: vllm-project/vllm-xpu-kernels#592\n"),
    ({"tests/test_kimi.py": "def test_kimi():\n    assert 1 + 1 == 2\n"},
     "Test the kimi op\n\nUpstream-Status: pending\n"),
]
APP_CHANGES: list[Change] = [
    ({"app/models/k3/__init__.py": APP_FILES["app/models/k3/__init__.py"].replace(
        "    from .nvidia.model import Model\nelse", "    from .xpu.model import Model\nelse"),
      "app/models/k3/xpu/model.py": "from ..nvidia.model import Model  # ops come from the kernels\n"},
     "Route k3 to the XPU path\n\nUpstream-Status: submitted\nUpstream-PR: vllm-project/vllm#56462\n"
     "Requires: kernels/0001-Add-the-kimi-op.patch\n"),
    ({"app/models/k3/nvidia/metadata.py": APP_FILES["app/models/k3/nvidia/metadata.py"].replace(
        "t.is_cuda", "t.device.type != 'cpu'")},
     "[XPU] Make the block-table assert device-generic\n\nUpstream-Status: pending\n"),
]


@dataclass(frozen=True)
class ExampleProject:
    root: Path  # holds kpatch.toml and patches/
    kernels: Path
    app: Path
    kernels_base: str
    app_base: str


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))  # byte for byte: CRLF files keep their CRs


def init_repo(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    run(["init", "--quiet", "--initial-branch=main", "--", str(path)])
    run(["config", "core.autocrlf", "false"], path)


def commit(repo: Path, files: dict[str, str], message: str, when: int, author: tuple[str, str] = AUTHOR) -> str:
    """Write `files`, stage everything and commit with a fixed author, committer and date; return the SHA."""
    write_files(repo, files)
    stamp = f"@{EPOCH + when} +0000"
    env = {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_AUTHOR_DATE": stamp,
           "GIT_COMMITTER_NAME": author[0], "GIT_COMMITTER_EMAIL": author[1], "GIT_COMMITTER_DATE": stamp}
    run(["add", "--all"], repo)
    run(["commit", "--quiet", "--no-gpg-sign", "--allow-empty", "--message", message], repo, env=env)
    return out(["rev-parse", "HEAD"], repo)


def write_patches(repo: Path, base: str, folder: Path) -> list[str]:
    """`git format-patch` of base..HEAD into `folder` with kpatch's flags; return the file names in order."""
    folder.mkdir(parents=True, exist_ok=True)
    listing = out([*FORMAT_PATCH, "--output-directory", str(folder), f"{base}..HEAD"], repo)
    return [Path(line).name for line in listing.splitlines() if line]


def make_upstream(root: Path, files: dict[str, str], churn: str, commits: int = 30) -> tuple[Path, str]:
    """A repository with `commits` commits; the middle one is tagged v1.0 and returned as the base."""
    init_repo(root)
    commit(root, files, "initial import", 0)
    base = ""
    for i in range(1, commits):
        sha = commit(root, {churn: "".join(f"churn {j}\n" for j in range(i))}, f"churn {i}", i)
        if i == commits // 2:
            run(["tag", "v1.0"], root)
            base = sha
    return root, base


def write_stack(upstream: Path, base: str, folder: Path, changes: list[Change]) -> list[str]:
    """Commit `changes` on a copy of `upstream` at `base`; write them as patch files and a series."""
    scratch = folder.parent / f".scratch-{folder.name}"
    shutil.copytree(upstream, scratch, symlinks=True)
    run(["checkout", "--quiet", "--detach", base], scratch)
    for index, (files, message) in enumerate(changes):
        commit(scratch, files, message, 1000 + index, PATCH_AUTHOR)
    names = write_patches(scratch, base, folder)
    (folder / "series").write_text("# applied in this order\n" + "".join(f"{n}\n" for n in names))
    shutil.rmtree(scratch)
    return names


def make_example_project(root: Path) -> ExampleProject:
    """Two upstreams under root/upstreams and a kpatch project under root/project patching them."""
    kernels, kernels_base = make_upstream(root / "upstreams" / "kernels", KERNEL_FILES, "csrc/cache_history.txt")
    app, app_base = make_upstream(root / "upstreams" / "app", APP_FILES, "docs/history.txt")
    project = root / "project"
    write_stack(kernels, kernels_base, project / "patches" / "kernels", KERNEL_CHANGES)
    write_stack(app, app_base, project / "patches" / "app", APP_CHANGES)
    # The app comes first in the file: the order must come from `requires`, not from the file.
    (project / "kpatch.toml").write_text(f"""version = 1

[[upstream]]
name = "app"
url = "{app}"
branch = "main"
base = "v1.0"
patches = "patches/app"
requires = ["kernels"]

[upstream.build]
command = "python3 setup.py -q bdist_wheel --dist-dir=$KPATCH_OUT"
pin-files = ["requirements/xpu.txt"]

[[upstream]]
name = "kernels"
url = "{kernels}"
branch = "main"
base = "{kernels_base}"
patches = "patches/kernels"
requires = []

[upstream.build]
command = "python3 setup.py -q bdist_wheel --dist-dir=$KPATCH_OUT --py-limited-api=cp38"
""", encoding="utf-8")
    return ExampleProject(root=project, kernels=kernels, app=app, kernels_base=kernels_base, app_base=app_base)
