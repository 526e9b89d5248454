"""`kpatch verify --wheel KERNELS --wheel APP`: the op contract of released halves, read from a real extension module
built here (a TORCH_LIBRARY block compiled with g++ against the CPU torch the tests use), a wheel made from it,
an sdist of a small application, a local package index, and an installed environment; and, when present on this
machine, the released vllm_xpu_kernels wheel and vLLM sdist (skipped otherwise, saying so)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest
import torch.utils.cpp_extension

from kpatch.verify.contract import ContractReport, binary, check, findings, read_binaries
from kpatch.verify.release import open_release
from kpatch.verify.released import check_released
from tests.support.cli import run_kpatch

KERNELS_CPP = """\
#include <torch/library.h>
#include <ATen/core/Tensor.h>

void fused_op(at::Tensor& q, const at::Tensor& k, int64_t n, const std::optional<at::Tensor>& pos) {}
at::Tensor add_one(const at::Tensor& x) { return x; }
void insert(at::Tensor& cache, const at::Tensor& slots) {}

TORCH_LIBRARY(_C, ops) {
  // registered without the default the application declares: a call that leaves `pos` out does not bind
  ops.def("fused_op(Tensor! q, Tensor k, int n, Tensor? pos) -> ()");
  ops.impl("fused_op", c10::DispatchKey::XPU, &fused_op);
  ops.def("add_one(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(_C, XPU, m) { m.impl("add_one", &add_one); }

TORCH_LIBRARY(_C_cache_ops, cache) {
  cache.def("insert(Tensor! cache, Tensor slots) -> ()");
  cache.impl("insert", c10::DispatchKey::XPU, &insert);
}
"""
APP_CPP = """\
#include <torch/library.h>
TORCH_LIBRARY(_C, ops) {
  ops.def("fused_op(Tensor! q, Tensor k, int n, Tensor? pos=None) -> ()");
  ops.def("missing_op(Tensor x) -> ()");
  ops.def("add_one(Tensor x) -> Tensor");
  ops.def("cuda_kernel(Tensor x) -> ()");
}
TORCH_LIBRARY(_C_cache_ops, cache) {
  cache.def("insert(Tensor! cache, Tensor slots) -> ()");
}
"""
APP_PY = """\
import torch

from app.platforms import current_platform


def forward(q, k, x):
    torch.ops._C.fused_op(q, k, 3)
    torch.ops._C.missing_op(x)
    return torch.ops._C.add_one(x)


def cache(c, s):
    torch.ops._C_cache_ops.insert(c, s)


def cuda_path(x):
    if current_platform.is_cuda():
        torch.ops._C.cuda_kernel(x)
"""
PLATFORMS_PY = """\
class _Platform:
    def is_cuda(self):
        return False


current_platform = _Platform()
"""
MISSING_LINE = 8  # torch.ops._C.missing_op(x) in APP_PY
ROOT = Path(__file__).resolve().parents[2]
REAL_KERNELS = os.environ.get("KPATCH_REAL_KERNELS_WHEEL")  # vllm_xpu_kernels-0.1.15.4-...whl
REAL_VLLM = os.environ.get("KPATCH_REAL_VLLM_SDIST")  # vllm-0.33.0.tar.gz


def _build_extension(source: str, out: Path) -> Path:
    """A shared object from one C++ file, compiled with g++ against torch's headers (not linked: only read)."""
    cpp = out.parent / "ops.cpp"
    cpp.write_text(source, encoding="utf-8")
    includes = [f"-I{p}" for p in torch.utils.cpp_extension.include_paths()]
    # -O0: at -O1 and above g++ writes short literals into the code as immediates, so they are not in the binary
    subprocess.run(["g++", "-std=c++20", "-O0", "-fPIC", "-shared", "-w", *includes, str(cpp), "-o", str(out)],
                   check=True)
    return out


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    """A wheel holding `files` (plus METADATA, WHEEL, RECORD)."""
    name, version = path.name.split("-")[:2]
    info = f"{name}-{version}.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp38-abi3-linux_x86_64\n"}
    record = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
              for n, d in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The kernels and the application as trees (what `kpatch verify` reads) and as released files."""
    base = tmp_path_factory.mktemp("pair")
    kernels = base / "kernels"
    (kernels / "csrc").mkdir(parents=True)
    (kernels / "csrc" / "torch_bindings.cpp").write_text(KERNELS_CPP, encoding="utf-8")
    build = base / "build"
    build.mkdir()
    so = _build_extension(KERNELS_CPP, build / "_C.abi3.so")
    wheel = _wheel(base / "appkernels-0.1-cp38-abi3-linux_x86_64.whl",
                   {"appkernels/__init__.py": b"", "appkernels/_C.abi3.so": so.read_bytes()})
    app = base / "app-tree"
    (app / "csrc").mkdir(parents=True)
    (app / "csrc" / "torch_bindings.cpp").write_text(APP_CPP, encoding="utf-8")
    (app / "app").mkdir()
    (app / "app" / "__init__.py").write_text("", encoding="utf-8")
    (app / "app" / "layer.py").write_text(APP_PY, encoding="utf-8")
    (app / "app" / "platforms.py").write_text(PLATFORMS_PY, encoding="utf-8")
    (app / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: app\nVersion: 0.1\n", encoding="utf-8")
    (app / "requirements").mkdir()
    (app / "requirements" / "xpu.txt").write_text("torch==2.14.0\nappkernels==0.1  # the pinned kernels\n")
    sdist = base / "app-0.1.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(app, arcname="app-0.1")
    app_wheel = _wheel(base / "app-0.1-py3-none-any.whl",
                       {f"app/{p.name}": p.read_bytes() for p in (app / "app").iterdir()})
    return {"kernels": kernels, "app": app, "so": so, "wheel": wheel, "sdist": sdist, "app_wheel": app_wheel}


def _view(report: ContractReport) -> tuple[object, ...]:
    """What a report finds, without where the kernels' side was read (a .cpp line or a .so)."""
    return (sorted((f.op, f.kind, f.function, str(f.site), f.detail) for f in findings(report)),
            sorted((m.namespace, m.op, m.want, m.got, m.breaking) for m in report.mismatches),
            sorted((n.op, n.kind, str(n.site)) for n in report.not_reached), report.off_xpu_calls, report.problems)


def test_schemas_libraries_and_impl_keys_are_read_from_a_built_extension(pair: dict[str, Path]) -> None:
    module = binary.read(pair["so"].read_bytes(), "_C.abi3.so")
    defs = {(d.namespace, d.schema) for d in module.registrations.definitions}
    assert defs == {("_C", "fused_op(Tensor! q, Tensor k, int n, Tensor? pos) -> ()"),
                    ("_C", "add_one(Tensor x) -> Tensor"),
                    ("_C_cache_ops", "insert(Tensor! cache, Tensor slots) -> ()")}
    keys = {(i.namespace, i.op, i.key) for i in module.registrations.implementations}
    # the TORCH_LIBRARY_IMPL block's key is in its symbol; an impl inside a TORCH_LIBRARY block's is not
    assert ("_C", "add_one", "XPU") in keys
    assert ("_C", "fused_op", binary.UNKNOWN_KEY) in keys and ("_C", "fused_op", "XPU") not in keys
    assert module.problems == ()


def test_a_stripped_module_and_a_non_elf_file_are_said_unreadable(pair: dict[str, Path], tmp_path: Path) -> None:
    stripped = tmp_path / "pkg" / "_C.abi3.so"
    stripped.parent.mkdir()
    subprocess.run(["strip", "-s", str(pair["so"]), "-o", str(stripped)], check=True)
    (tmp_path / "pkg" / "_other.abi3.so").write_bytes(b"not an ELF file")
    side = read_binaries(tmp_path, ("pkg",))
    assert not side.defined
    assert any("pkg/_C.abi3.so: holds 3 op schema(s) but no symbol names a library" in p for p in side.problems)
    assert any(p.startswith("pkg/_other.abi3.so: cannot be read as an extension module") for p in side.problems)


def test_the_contract_on_the_wheel_and_the_sdist_finds_what_it_finds_on_the_trees(
        pair: dict[str, Path], tmp_path: Path) -> None:
    trees = check(pair["kernels"], pair["app"])
    result = check_released(open_release(str(pair["wheel"]), tmp_path / "k"),
                            open_release(str(pair["sdist"]), tmp_path / "a"))
    released = result.contracts[0].report
    assert released is not None
    assert _view(released) == _view(trees)
    got = {(f.op, f.kind) for f in findings(released)}
    assert got == {("_C.missing_op", "undefined"), ("_C.fused_op", "unbound")}
    assert [m.op for m in released.mismatches if m.breaking] == ["fused_op"]
    # the binary says add_one's XPU key (an IMPL block); it cannot say fused_op's or insert's: said, not passed
    assert released.keys_unread == ("_C.fused_op", "_C_cache_ops.insert")
    assert trees.keys_unread == ()
    seen = {s.op: s for s in result.contracts[0].seen}
    assert seen["_C.missing_op"].site == f"app/layer.py:{MISSING_LINE}"
    assert seen["_C.missing_op"].error == "AttributeError: '_OpNamespace' '_C' object has no attribute 'missing_op'"


def test_verify_wheel_cli_names_the_call_site_and_the_attribute_error(pair: dict[str, Path]) -> None:
    ran = run_kpatch(pair["wheel"].parent, "verify", "--wheel", str(pair["wheel"]), "--wheel", str(pair["sdist"]))
    assert ran.exit_code == 1, ran.output
    line = next(ln for ln in ran.output.splitlines() if "what a user sees" in ln and "missing_op" in ln)
    assert f"app/layer.py:{MISSING_LINE} in forward raises AttributeError: '_OpNamespace' '_C' object has no " \
           "attribute 'missing_op'" in line
    ran = run_kpatch(pair["wheel"].parent, "verify", "--json", "--wheel", str(pair["wheel"]), "--wheel",
                     str(pair["sdist"]))
    doc = json.loads(ran.stdout)
    assert doc["ok"] is False and doc["error"]["exit_code"] == 1
    assert "_C.missing_op (not defined by the kernels) called from app/layer.py:8" in doc["error"]["message"]
    assert {s["op"] for s in doc["result"]["contracts"][0]["seen"]} >= {"_C.missing_op", "_C.fused_op"}


def test_verify_wheel_takes_an_application_wheel_and_rejects_a_bad_half(pair: dict[str, Path], tmp_path: Path) -> None:
    result = check_released(open_release(str(pair["wheel"]), tmp_path / "k"),
                            open_release(str(pair["app_wheel"]), tmp_path / "a"))
    report = result.contracts[0].report
    assert report is not None
    # a pure-Python application wheel declares no schemas: the calls are still checked against the kernels
    assert {(f.op, f.kind) for f in findings(report)} == {("_C.missing_op", "undefined"), ("_C.fused_op", "unbound")}
    bad = tmp_path / "broken-0.1-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    ran = run_kpatch(tmp_path, "verify", "--wheel", str(bad), "--wheel", str(pair["sdist"]))
    assert ran.exit_code == 2 and f"--wheel {bad}: cannot be unpacked" in ran.output
    ran = run_kpatch(tmp_path, "verify", "--wheel", str(pair["wheel"]))
    assert ran.exit_code == 2 and "--wheel takes two halves" in ran.output
    ran = run_kpatch(tmp_path, "verify", "--wheel", "appkernels>=0.1", "--wheel", str(pair["sdist"]))
    assert ran.exit_code == 2 and "must pin one version" in ran.output


def simple_index(root: Path, files: dict[str, list[Path]]) -> None:
    """A PEP 503 index in `root`: a page per project linking its files, each with its sha256."""
    for project, paths in files.items():
        (root / project).mkdir(parents=True)
        links = []
        for path in paths:
            (root / project / path.name).write_bytes(path.read_bytes())
            links.append(f'<a href="{path.name}#sha256={hashlib.sha256(path.read_bytes()).hexdigest()}">'
                         f"{path.name}</a>")
        (root / project / "index.html").write_text("<html><body>" + "".join(links) + "</body></html>")


def _serve(root: Path) -> tuple[ThreadingHTTPServer, str]:
    """A static file server on 127.0.0.1 (a PEP 503 index when the folder holds one)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def index(pair: dict[str, Path], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 index on 127.0.0.1 serving the kernels wheel, its sha256 in the link."""
    root = tmp_path / "index"
    (root / "appkernels").mkdir(parents=True)
    data = pair["wheel"].read_bytes()
    (root / "appkernels" / pair["wheel"].name).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    (root / "appkernels" / "index.html").write_text(
        f'<html><body><a href="{pair["wheel"].name}#sha256={digest}">{pair["wheel"].name}</a></body></html>')
    server, url = _serve(root)
    try:
        yield url, root
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the base class's signature
        pass


def test_a_requirement_is_downloaded_from_the_index_and_checked_by_sha256(
        pair: dict[str, Path], index: tuple[str, Path], tmp_path: Path) -> None:
    url, root = index
    env = {"PIP_INDEX_URL": url}
    ran = run_kpatch(tmp_path, "verify", "--cache-dir", str(tmp_path / "cache"), "--wheel", "appkernels==0.1",
                     "--wheel", str(pair["sdist"]), env=env)
    assert ran.exit_code == 1, ran.output
    assert "missing_op" in ran.output and "appkernels 0.1 (wheel)" in ran.output
    page = root / "appkernels" / "index.html"
    page.write_text(page.read_text().replace("#sha256=", "#sha256=0"))  # the index now lists another digest
    ran = run_kpatch(tmp_path, "verify", "--cache-dir", str(tmp_path / "cache2"), "--wheel", "appkernels==0.1",
                     "--wheel", str(pair["sdist"]), env=env)
    assert ran.exit_code == 4, ran.output
    assert f"{pair['wheel'].name} has sha256 {hashlib.sha256(pair['wheel'].read_bytes()).hexdigest()}, the " \
           "index lists 0" in ran.output
    ran = run_kpatch(tmp_path, "verify", "--cache-dir", str(tmp_path / "cache3"), "--wheel", "appkernels==9.9",
                     "--wheel", str(pair["sdist"]), env=env)
    assert ran.exit_code == 4 and "no sdist or x86_64 wheel of appkernels==9.9" in ran.output


def test_python_reads_the_distributions_installed_in_an_environment(
        pair: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "site"
    for wheel in (pair["wheel"], pair["app_wheel"]):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                        str(target), str(wheel)], check=True)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]))
    ran = run_kpatch(tmp_path, "verify", "--python", sys.executable, "--wheel", "appkernels", "--wheel", "app")
    assert ran.exit_code == 1, ran.output
    assert "appkernels 0.1 (installed)" in ran.output
    assert "app/layer.py:8 in forward raises AttributeError" in ran.output
    ran = run_kpatch(tmp_path, "verify", "--python", sys.executable, "--wheel", "appkernels", "--wheel", "nosuch")
    assert ran.exit_code == 2 and "--wheel nosuch: not installed in the environment of" in ran.output


@pytest.mark.skipif(not REAL_KERNELS, reason="the released kernels wheel is not on this machine: set "
                    "KPATCH_REAL_KERNELS_WHEEL to vllm_xpu_kernels-0.1.15.4-cp38-abi3-manylinux_2_28_x86_64.whl")
def test_the_released_kernels_wheel_registers_no_kimi_k3_op(tmp_path: Path) -> None:
    half = open_release(str(REAL_KERNELS), tmp_path)
    side = read_binaries(half.root, half.packages)
    assert side.problems == ()
    assert str(side.defined[("_C", "rms_norm")].schema.text()) == \
        "rms_norm(Tensor! result, Tensor input, Tensor? weight, float epsilon) -> ()"
    assert ("_C_cache_ops", "concat_and_cache_mla") in side.defined
    assert not [op for _, op in side.defined if "kimi" in op]


@pytest.mark.skipif(not (REAL_KERNELS and REAL_VLLM), reason="the released pair is not on this machine: set "
                    "KPATCH_REAL_KERNELS_WHEEL and KPATCH_REAL_VLLM_SDIST (vllm-0.33.0.tar.gz)")
def test_the_released_pair_raises_the_attribute_error_at_kimi_k3s_mla_epilogue(tmp_path: Path) -> None:
    result = check_released(open_release(str(REAL_KERNELS), tmp_path / "k"),
                            open_release(str(REAL_VLLM), tmp_path / "v"))
    seen = {s.op: s for s in result.contracts[0].seen}
    kimi = seen["_C.fused_kimi_k3_mla_decode_q_concat_kv_cache_insert"]
    assert kimi.site.startswith("vllm/models/kimi_k3/nvidia/ops/fused_mla_key_concat_kv_cache.py:")
    assert kimi.error.startswith("AttributeError: '_OpNamespace' '_C' object has no attribute")


def test_released_pairs_writes_the_table_of_each_app_release_with_its_pinned_and_the_newest_kernels(
        pair: dict[str, Path], tmp_path: Path) -> None:
    """scripts/released_pairs.py against a local index: app 0.1 pins appkernels 0.1 (which lacks missing_op and
    drops fused_op's default); appkernels 0.2, the newest, has both."""
    fixed = KERNELS_CPP.replace("Tensor? pos) -> ()", "Tensor? pos=None) -> ()").replace(
        '  ops.def("add_one', '  ops.def("missing_op(Tensor x) -> ()");\n  ops.def("add_one')
    (tmp_path / "b").mkdir()
    so = _build_extension(fixed, tmp_path / "b" / "_C.abi3.so")
    root = tmp_path / "index"
    files = {"appkernels": [pair["wheel"], _wheel(tmp_path / "appkernels-0.2-cp38-abi3-linux_x86_64.whl",
                                                 {"appkernels/_C.abi3.so": so.read_bytes()})],
             "app": [pair["sdist"]]}
    simple_index(root, files)
    doc = tmp_path / "verify.md"
    doc.write_text("# Pairs\n\nbefore\n<!-- released-pairs:start -->\nold\n<!-- released-pairs:end -->\nafter\n")
    server, url = _serve(root)
    try:
        ran = subprocess.run([sys.executable, str(ROOT / "scripts" / "released_pairs.py"), "--app", "app",
                              "--kernels", "appkernels", "--model", "app/", "--model-name", "Demo", "--index", url,
                              "--cache-dir", str(tmp_path / "cache"), "--write", str(doc), "--json"],
                             capture_output=True, text=True, check=False)
    finally:
        server.shutdown()
        server.server_close()
    assert ran.returncode == 0, ran.stderr
    rows = {r["kernels"]: r for r in json.loads(ran.stdout)}
    assert rows["appkernels 0.1"]["pinned"] and not rows["appkernels 0.2"]["pinned"]
    assert rows["appkernels 0.1"]["model_lacks"] == ["fused_op", "missing_op"]
    assert rows["appkernels 0.1"]["serves_model"] is False and rows["appkernels 0.2"]["serves_model"] is True
    text = doc.read_text()
    assert text.startswith("# Pairs\n\nbefore\n<!-- released-pairs:start -->\n") and text.endswith("after\n")
    assert "old" not in text
    assert "| app 0.1 | appkernels 0.1 | yes | **no** | `fused_op`, `missing_op` | 1 | 1 | 2 |" in text
    assert "| app 0.1 | appkernels 0.2 | no (newest) | yes | none | 0 | 0 | 3 |" in text
