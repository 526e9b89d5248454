"""Example upstreams kpatch generates itself: a kernels-like and an app-like repository with patch stacks.

Used by `kpatch demo` and by the tests; every repository is a real git repository with a real history.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpatch.examples import ext as examples_ext
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
    # An abi3 platform wheel like the real kernels', built the PEP 517 way (see PEP517_BUILD).
    "setup.py": "import os\nfrom setuptools import Distribution, setup\n\n\n"
                "class Binary(Distribution):\n    def has_ext_modules(self):\n        return True\n\n\n"
                "setup(name='vllm-xpu-kernels', version=os.environ.get('SETUPTOOLS_SCM_PRETEND_VERSION', '0.0.0'),\n"
                "      packages=['vllm_xpu_kernels'], distclass=Binary)\n",
}
KERNEL_FILES.update(examples_ext.files())  # a real C++ extension (24 translation units) for compiler-cache builds
_PYPROJECT = ('[build-system]\nrequires = ["setuptools>=61", "wheel"]\n'
              'build-backend = "setuptools.build_meta"\n')
# An abi3 platform wheel, as the real kernels' `--py-limited-api=cp38`.
KERNEL_FILES.update({"pyproject.toml": _PYPROJECT, "setup.cfg": "[bdist_wheel]\npy_limited_api = cp38\n"})
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
    "pyproject.toml": _PYPROJECT,
    "setup.py": "import os\nfrom setuptools import find_namespace_packages, setup\n\n"
                "with open('requirements/xpu.txt') as f:\n"
                "    requires = [line.strip() for line in f if line.strip() and not line.startswith(('#', '-'))]\n\n"
                "setup(name='app', version=os.environ.get('SETUPTOOLS_SCM_PRETEND_VERSION', '0.0.0'),\n"
                "      packages=find_namespace_packages(include=['app', 'app.*']), install_requires=requires)\n",
}
# A tiny real op contract (what `kpatch verify` reads): the kernels define and register ops for XPU in `_C` and
# `_C_cache_ops` (TORCH_EXTENSION_NAME is the CMake target `_C`); the app declares the same schemas in its own
# C++ bindings (its CUDA build) and calls them from Python. `_C.py` stands in for the compiled extension: it
# registers the same schemas for XPU through torch.library, so an installed pair can be asked at run time.
KIMI_SCHEMA = ("fused_kimi_mla_insert(Tensor! q, Tensor! kv_cache, Tensor slot_mapping, int block_size, "
               "Tensor? positions=None, Tensor? cos_sin_cache=None) -> ()")
_CACHE_SCHEMA = ("concat_and_cache_mla(Tensor kv_c, Tensor k_pe, Tensor! kv_cache, Tensor slot_mapping, "
                 "str kv_cache_dtype, Tensor scale) -> ()")
KERNEL_FILES["CMakeLists.txt"] += ("define_gpu_extension_target(\n  _C\n  DESTINATION vllm_xpu_kernels\n"
                                   "  SOURCES ${VLLM_EXT_SRC})\n")
KERNEL_FILES["csrc/torch_bindings.cpp"] = (
    '#include "core/registration.h"\n#include "ops.h"\n\nTORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n'
    '  ops.def("rms_norm(Tensor! out, Tensor input) -> ()");\n'
    '  ops.impl("rms_norm", torch::kXPU, &rms_norm);\n\n'
    '  // One schema across lines: C++ joins the adjacent literals.\n'
    '  ops.def(\n      "silu_and_mul(Tensor! out, "\n      "Tensor input) -> ()");\n'
    '  ops.impl("silu_and_mul", torch::kXPU, &silu_and_mul);\n}\n\n'
    'TORCH_LIBRARY_EXPAND(CONCAT(TORCH_EXTENSION_NAME, _cache_ops), cache_ops) {\n'
    f'  cache_ops.def("{_CACHE_SCHEMA}");\n'
    '  cache_ops.impl("concat_and_cache_mla", torch::kXPU, &concat_and_cache_mla);\n}\n')
KERNEL_FILES["vllm_xpu_kernels/_C.py"] = (
    '"""Stands in for the compiled extension: registers csrc/torch_bindings.cpp\'s ops for XPU."""\n\n'
    "import torch\n\n"
    "SCHEMAS = {\n"
    '    "_C": ["rms_norm(Tensor! out, Tensor input) -> ()", "silu_and_mul(Tensor! out, Tensor input) -> ()"],\n'
    f'    "_C_cache_ops": ["{_CACHE_SCHEMA}"],\n'
    "}\n"
    "LIBRARIES = []\n"
    "for namespace, schemas in SCHEMAS.items():\n"
    '    library = torch.library.Library(namespace, "FRAGMENT")\n'
    "    for schema in schemas:\n"
    "        library.define(schema)\n"
    '        library.impl(schema.split("(", 1)[0], lambda *args: None, "XPU")\n'
    "    LIBRARIES.append(library)\n")
APP_FILES["csrc/torch_bindings.cpp"] = (
    '#include "ops.h"\n\n// Registered under "_C" so the ops are torch.ops._C.<name>, as in the CUDA build.\n'
    "STABLE_TORCH_LIBRARY_FRAGMENT(_C, ops) {\n"
    '  ops.def("rms_norm(Tensor! out, Tensor input) -> ()");\n'
    '  ops.def("silu_and_mul(Tensor! out, Tensor input) -> ()");\n'
    '  ops.def("cutlass_scaled_mm(Tensor! out, Tensor a, Tensor b) -> ()");\n}\n\n'
    "STABLE_TORCH_LIBRARY_IMPL(_C, CUDA, ops) {\n"
    '  ops.impl("rms_norm", TORCH_BOX(&rms_norm));\n'
    '  ops.impl("silu_and_mul", TORCH_BOX(&silu_and_mul));\n'
    '  ops.impl("cutlass_scaled_mm", TORCH_BOX(&cutlass_scaled_mm));\n}\n\n'
    "STABLE_TORCH_LIBRARY_FRAGMENT(_C_cache_ops, ops) {\n"
    f'  ops.def("{_CACHE_SCHEMA}");\n}}\n')
APP_FILES["app/ops.py"] = (
    '"""The kernels\' ops, called by name."""\n\nimport torch\n\n\n'
    "def rms_norm(out, x):\n    torch.ops._C.rms_norm(out, x)\n\n\n"
    "def silu_and_mul(out, x):\n    torch.ops._C.silu_and_mul(out, x)\n\n\n"
    "def cutlass_scaled_mm(out, a, b):  # CUDA-only: kpatch.toml [verify] cuda-only says why\n"
    "    torch.ops._C.cutlass_scaled_mm(out, a, b)\n\n\n"
    "def concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale):\n"
    "    torch.ops._C_cache_ops.concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale)\n")
# What `kpatch test` runs on the example pair (in the build image, the pair installed from its lock): the kernels
# stack adds a pure-Python stand-in for the op and its tests; the app stack adds a test of the pair together.
KIMI_OP = ('"""The kimi MLA key concat, in plain Python: each head\'s key is its k_nope, then the shared k_pe."""\n\n\n'
           "def key_concat(k_nope, k_pe):\n    return [list(head) + list(k_pe) for head in k_nope]\n")
KIMI_TESTS = ("import os\n\nimport pytest\n\nfrom vllm_xpu_kernels.kimi import key_concat\n\n\n"
              "@pytest.mark.parametrize(\"heads\", [1, 2, 4])\n"
              "def test_key_concat_puts_the_rope_part_after_each_head(heads):\n"
              "    k_nope = [[h * 10 + i for i in range(3)] for h in range(heads)]\n"
              "    assert key_concat(k_nope, [7, 8]) == [row + [7, 8] for row in k_nope]\n\n\n"
              "def test_key_concat_of_no_heads_is_empty():\n    assert key_concat([], [7, 8]) == []\n\n\n"
              "def test_the_devices_kpatch_passes_are_in_the_container():\n"
              "    for path in os.environ.get(\"KPATCH_DEVICES\", \"\").split():\n"
              "        assert os.path.exists(path), path\n")
APP_PAIR_TEST = ("from importlib import metadata\n\n\n"
                 "def test_the_app_pins_exactly_the_installed_kernels():\n"
                 "    pins = [r.replace(\" \", \"\").replace(\"(\", \"\").replace(\")\", \"\")"
                 " for r in metadata.requires(\"app\") or []]\n"
                 "    assert \"vllm-xpu-kernels==\" + metadata.version(\"vllm-xpu-kernels\") in pins\n\n\n"
                 "def test_the_kernels_have_the_op_the_xpu_path_calls():\n"
                 "    from vllm_xpu_kernels.kimi import key_concat\n\n"
                 "    assert key_concat([[1]], [2]) == [[1, 2]]\n")
KERNEL_CHANGES: list[Change] = [
    ({"csrc/kimi.cpp": "// kimi op\nvoid kimi() {}\n", "vllm_xpu_kernels/kimi.py": KIMI_OP,
      "csrc/ops.h": KERNEL_FILES["csrc/ops.h"] + "void kimi();\n",
      "csrc/kernels.ini": KERNEL_FILES["csrc/kernels.ini"].replace("kimi = off", "kimi = on"),
      "CMakeLists.txt": KERNEL_FILES["CMakeLists.txt"].replace("  \"csrc/layernorm.cpp\"\n",
                                                               "  \"csrc/kimi.cpp\"\n  \"csrc/layernorm.cpp\"\n")},
     "Add the kimi op\n\nThe XPU kernel for the fused epilogue.\n\nUpstream-Status: submitted\n"
     "Upstream-PR: vllm-project/vllm-xpu-kernels#592\n"),
    ({"tests/test_kimi.py": KIMI_TESTS},
     "Test the kimi op\n\nUpstream-Status: pending\n"),
]
APP_CHANGES: list[Change] = [
    ({"app/models/k3/__init__.py": APP_FILES["app/models/k3/__init__.py"].replace(
        "    from .nvidia.model import Model\nelse", "    from .xpu.model import Model\nelse"),
      "app/models/k3/xpu/model.py": "from ..nvidia.model import Model  # ops come from the kernels\n",
      "tests/test_k3_xpu.py": APP_PAIR_TEST},
     "Route k3 to the XPU path\n\nUpstream-Status: submitted\nUpstream-PR: vllm-project/vllm#56462\n"
     "Requires: kernels/0001-Add-the-kimi-op.patch\n"),
    ({"app/models/k3/nvidia/metadata.py": APP_FILES["app/models/k3/nvidia/metadata.py"].replace(
        "t.is_cuda", "t.device.type != 'cpu'")},
     "[XPU] Make the block-table assert device-generic\n\nUpstream-Status: pending\n"),
]

# The stacks add one op to both sides (the seed's shape): the kernels define and register it for XPU, the app
# declares it in its C++ bindings and its XPU model calls it, leaving the optional RoPE arguments to the defaults.
_SPLIT = KIMI_SCHEMA.index("int block_size")
KERNEL_CHANGES[0][0]["csrc/torch_bindings.cpp"] = KERNEL_FILES["csrc/torch_bindings.cpp"].replace(
    '  ops.impl("silu_and_mul", torch::kXPU, &silu_and_mul);\n',
    '  ops.impl("silu_and_mul", torch::kXPU, &silu_and_mul);\n\n'
    f'  ops.def(\n      "{KIMI_SCHEMA[:_SPLIT]}"\n      "{KIMI_SCHEMA[_SPLIT:]}");\n'
    '  ops.impl("fused_kimi_mla_insert", torch::kXPU, &fused_kimi_mla_insert);\n')
KERNEL_CHANGES[0][0]["vllm_xpu_kernels/_C.py"] = KERNEL_FILES["vllm_xpu_kernels/_C.py"].replace(
    '"silu_and_mul(Tensor! out, Tensor input) -> ()"]', f'"silu_and_mul(Tensor! out, Tensor input) -> ()",\n'
    f'           "{KIMI_SCHEMA}"]')
APP_CHANGES[0][0]["csrc/torch_bindings.cpp"] = APP_FILES["csrc/torch_bindings.cpp"].replace(
    '  ops.def("cutlass_scaled_mm', f'  ops.def(\n      "{KIMI_SCHEMA}");\n  ops.def("cutlass_scaled_mm')
APP_CHANGES[0][0]["app/models/k3/xpu/ops.py"] = (
    "import torch\n\n\ndef kimi_mla_insert(q, kv_cache, slot_mapping):\n"
    "    torch.ops._C.fused_kimi_mla_insert(q, kv_cache, slot_mapping, kv_cache.shape[1])\n")
VERIFY_TOML = """
[verify]
cuda-only = [
  { op = "cutlass_scaled_mm", why = "CUTLASS GEMM: CUDA-only; the XPU path runs oneDNN's GEMM" },
]
"""


# The example upstreams build the PEP 517 way (pip as the frontend, setuptools' backend), with what the build
# environment has (no isolation: the build image's, or the local backend's venv), never `setup.py bdist_wheel`.
PEP517_BUILD = "python3 -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir=$KPATCH_OUT ."
KERNELS_BUILD = APP_BUILD = PEP517_BUILD
TEST_PYTEST = "pytest==9.0.3"  # the example suites' one requirement, from the package index


@dataclass(frozen=True)
class ExampleProject:
    root: Path  # holds kpatch.toml and patches/
    kernels: Path
    app: Path
    kernels_base: str
    app_base: str


def write_files(root: Path, files: Mapping[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # byte for byte: CRLF files keep their CRs; bytes (wheels in a wheelhouse) go in as they are
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


def init_repo(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    run(["init", "--quiet", "--initial-branch=main", "--", str(path)])
    run(["config", "core.autocrlf", "false"], path)


def commit(repo: Path, files: Mapping[str, str | bytes], message: str, when: int,
           author: tuple[str, str] = AUTHOR) -> str:
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


def make_upstream(root: Path, files: Mapping[str, str | bytes], churn: str, commits: int = 30) -> tuple[Path, str]:
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


def make_example_project(root: Path, wheelhouse: Mapping[str, bytes] | None = None) -> ExampleProject:
    """Two upstreams under root/upstreams and a kpatch project under root/project patching them.

    With `wheelhouse` (wheel file name -> bytes, e.g. a torch), both upstreams carry those wheels in
    `wheelhouse/` and install their requirements from there (no index) before building, as the real ones do
    from the package index: the kernels pin torch==2.13.0, the app torch==2.14.0, like vllm-xpu-kernels
    4543b580 and vLLM v0.33.0.
    """
    kernel_files: dict[str, str | bytes] = dict(KERNEL_FILES)
    app_files: dict[str, str | bytes] = dict(APP_FILES)
    kernels_build, app_build = KERNELS_BUILD, APP_BUILD
    kernels_pins = ""
    if wheelhouse:
        local = "--no-index\n--find-links wheelhouse\n"
        wheels = {f"wheelhouse/{name}": data for name, data in wheelhouse.items()}
        kernel_files |= {**wheels, "requirements.txt": f"{local}torch==2.13.0\n"}
        app_files |= {**wheels, "requirements/xpu.txt": f"{local}vllm-xpu-kernels==0.1.0\ntorch==2.14.0\n"}
        install = "python3 -m pip install --quiet -r {} && "
        kernels_build = install.format("requirements.txt") + kernels_build
        app_build = install.format("requirements/xpu.txt") + app_build
        kernels_pins = 'pin-files = ["requirements.txt"]\n'
    kernels, kernels_base = make_upstream(root / "upstreams" / "kernels", kernel_files, "csrc/cache_history.txt")
    app, app_base = make_upstream(root / "upstreams" / "app", app_files, "docs/history.txt")
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
command = "{app_build}"
pin-files = ["requirements/xpu.txt"]

[upstream.test]
command = "python3 -m pytest -v tests --junitxml=$KPATCH_JUNIT"
requires = ["{TEST_PYTEST}"]

[[upstream]]
name = "kernels"
url = "{kernels}"
branch = "main"
base = "{kernels_base}"
patches = "patches/kernels"
requires = []

[upstream.build]
command = "{kernels_build}"
{kernels_pins}
[upstream.test]
command = "python3 -m pytest -v tests --junitxml=$KPATCH_JUNIT"
requires = ["{TEST_PYTEST}"]
timeout = 300
""", encoding="utf-8")
    with (project / "kpatch.toml").open("a", encoding="utf-8") as toml:
        toml.write(VERIFY_TOML)
    return ExampleProject(root=project, kernels=kernels, app=app, kernels_base=kernels_base, app_base=app_base)
