"""`kpatch verify` on the example pair: its op contract, the built pair against its lock, and the pair installed
(built for real with --backend local, installed for real with pip into a folder on the import path)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result

from kpatch.config import load
from kpatch.errors import ExitCode, VerifyFailed, WorktreeError
from kpatch.examples.upstreams import ExampleProject, make_example_project
from kpatch.project.workspace import Workspace
from kpatch.verify.gate import gate
from kpatch.wheels import lock as lockfile
from tests.support.cli import run_kpatch


@dataclass(frozen=True)
class Built:
    example: ExampleProject
    cache: Path

    @property
    def root(self) -> Path:
        return self.example.root

    def verify(self, *args: str) -> Result:
        return run_kpatch(self.root, "verify", "--cache-dir", str(self.cache), *args)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, build_env: dict[str, str]) -> Iterator[Built]:
    """The example applied and its pair built once for the module (tests copy what they change)."""
    root = tmp_path_factory.mktemp("built")
    with pytest.MonkeyPatch.context() as env:  # the per-test isolation fixture does not cover module fixtures
        (root / "home").mkdir()
        (root / "home" / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.invalid\n")
        env.setenv("HOME", str(root / "home"))
        env.setenv("XDG_CACHE_HOME", str(root / "home" / ".cache"))
        env.setenv("GIT_CONFIG_GLOBAL", str(root / "home" / ".gitconfig"))
        for key, value in build_env.items():  # the run's seed venv and compiler cache, as each test gets them
            env.setenv(key, value)
        pair = Built(make_example_project(root), root / "cache")
        assert run_kpatch(pair.root, "apply", "--cache-dir", str(pair.cache)).exit_code == 0
        made = run_kpatch(pair.root, "build-wheels", "--backend", "local", "--cache-dir", str(pair.cache))
        assert made.exit_code == 0, made.output
        yield pair


@pytest.fixture(scope="module")
def site(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built pair, installed by pip into a folder (put on the import path by each test that uses it)."""
    target = tmp_path_factory.mktemp("site")
    wheels = sorted(str(p) for p in (built.root / "dist").glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                    str(target), *wheels], check=True, capture_output=True)
    return target


def copy_dist(built: Built, tmp_path: Path) -> Path:
    """A copy of dist/ to tamper with; returns its lock."""
    shutil.copytree(built.root / "dist", tmp_path / "dist")
    return tmp_path / "dist" / "pylock.toml"


def checks(result: Result) -> dict[tuple[str, str], dict[str, str]]:
    return {(c["area"], c["subject"]): c for c in json.loads(result.stdout)["result"]["checks"]}


def failures(result: Result) -> list[str]:
    return [f"{c['area']} {c['subject']}: {c['detail']}" for c in json.loads(result.stdout)["result"]["checks"]
            if c["status"] == "failed"]


def test_the_built_example_pair_verifies(built: Built) -> None:
    result = built.verify("--json")
    assert result.exit_code == 0, result.output
    envelope = json.loads(result.stdout)
    payload = envelope["result"]
    assert envelope["ok"] and payload["lock"] == str(built.root / "dist" / "pylock.toml")
    found = checks(result)
    assert found[("pin", "app -> vllm-xpu-kernels")]["status"] == "passed"
    assert {c["area"] for c in payload["checks"]} >= {"wheel", "pin", "torch", "contract"}
    (contract,) = payload["contracts"]
    assert (contract["kernels"], contract["app"]) == ("kernels", "app")
    assert contract["report"]["cuda_only"] == ["_C.cutlass_scaled_mm"]
    assert contract["report"]["namespaces"] == ["_C", "_C_cache_ops"]
    human = built.verify()
    assert human.exit_code == 0 and "verify passed" in human.stdout


def test_a_wheel_whose_hash_differs_names_the_file_and_both_hashes(built: Built, tmp_path: Path) -> None:
    lock = copy_dist(built, tmp_path)
    locked = lockfile.read(lock).wheels[0]
    wheel = lock.parent / locked.filename
    data = wheel.read_bytes()
    wheel.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the same size: only the hash can tell
    actual = hashlib.sha256(wheel.read_bytes()).hexdigest()
    result = built.verify("--lock", str(lock), "--json")
    assert result.exit_code == ExitCode.CONFLICT
    assert failures(result)[0] == (f"wheel {locked.filename}: sha256 {actual} differs from the lock's "
                                   f"{locked.sha256} (size {locked.size}, locked {locked.size})")


def test_a_wheel_of_another_size_is_not_read(built: Built, tmp_path: Path) -> None:
    """The size is checked first: a wheel of another size is never hashed (or read)."""
    lock = copy_dist(built, tmp_path)
    locked = lockfile.read(lock).wheels[0]
    wheel = lock.parent / locked.filename
    wheel.write_bytes(wheel.read_bytes() + b"x")
    result = built.verify("--lock", str(lock), "--json")
    assert result.exit_code == ExitCode.CONFLICT
    assert failures(result)[0] == (f"wheel {locked.filename}: size {locked.size + 1} differs from the lock's "
                                   f"{locked.size}")


def test_a_missing_wheel_is_a_failed_check(built: Built, tmp_path: Path) -> None:
    lock = copy_dist(built, tmp_path)
    app = next(w for w in lockfile.read(lock).wheels if w.upstream == "app")
    (lock.parent / app.filename).unlink()
    result = built.verify("--lock", str(lock), "--json")
    assert result.exit_code == ExitCode.CONFLICT
    assert failures(result) == [f"wheel {app.filename}: missing from {lock.parent}"]
    assert checks(result)[("wheel", app.filename)]["fix"].startswith("run 'kpatch build-wheels'")


@pytest.mark.parametrize("edit", [("lock-version = \"1.0\"", "lock-version = \"2.0\""),
                                  ("format = 1", "format = 99")])
def test_a_lock_of_an_unknown_version_is_bad_input(built: Built, tmp_path: Path, edit: tuple[str, str]) -> None:
    lock = copy_dist(built, tmp_path)
    text = lock.read_text()
    assert edit[0] in text
    lock.write_text(text.replace(edit[0], edit[1]))
    before = lock.read_bytes()
    result = built.verify("--lock", str(lock))
    assert result.exit_code == ExitCode.BAD_INPUT
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith(f"error: {lock}: ")
    assert lock.read_bytes() == before
    missing = built.verify("--lock", str(tmp_path / "nowhere.toml"))
    assert missing.exit_code == ExitCode.BAD_INPUT
    assert f"error: no lock at {tmp_path / 'nowhere.toml'}" in missing.stderr


def test_halves_built_against_different_torch_or_pinned_to_another_kernels(built: Built, tmp_path: Path) -> None:
    lock = copy_dist(built, tmp_path)
    content = lockfile.read(lock)
    kernels = next(u for u in content.upstreams if u.name == "kernels")
    app_wheel = next(w.filename for w in content.wheels if w.upstream == "app")
    app_torch = "2.14.0"  # the lock says the halves saw two torches (the example's hermetic builds saw none)
    upstreams = tuple(dataclasses.replace(u, torch=app_torch if u.name == "app" else "2.13.0")
                      for u in content.upstreams)
    kernels = next(u for u in upstreams if u.name == "kernels")
    old = next(w for w in content.wheels if w.upstream == "kernels")
    other = dataclasses.replace(old, version=old.version + "9", filename=old.filename.replace(old.version,
                                                                                              old.version + "9"))
    (lock.parent / old.filename).rename(lock.parent / other.filename)  # the same bytes under another version
    wheels = tuple(other if w.upstream == "kernels" else w for w in content.wheels)
    lockfile.write(lock.parent, dataclasses.replace(content, upstreams=upstreams, wheels=wheels))
    result = built.verify("--lock", str(lock), "--json")
    assert result.exit_code == ExitCode.CONFLICT
    got = "\n".join(failures(result))
    assert f"the halves were built against different torch: app against {app_torch}, kernels against " \
           f"{kernels.torch}" in got
    assert "app requires 'torch==" not in got  # the example app wheel requires no torch at all
    assert f"pin app -> vllm-xpu-kernels: {app_wheel} requires 'vllm-xpu-kernels=={old.version}', the lock has " \
           f"vllm-xpu-kernels {other.version}: the halves were not built together" in got
    assert f"pin {other.filename}: METADATA says vllm-xpu-kernels {old.version}, the lock vllm-xpu-kernels " \
           f"{other.version}" in got


def test_verify_without_a_lock_still_checks_the_contract(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    with pytest.raises(WorktreeError):  # build-wheels' gate needs the applied worktrees
        gate(Workspace.create(load(root / "kpatch.toml"), tmp_path / "cache", None))
    before = run_kpatch(root, "verify", *cache, "--json")
    assert before.exit_code == ExitCode.CONFLICT  # nothing applied and no lock: nothing checked is no pass
    assert checks(before)[("contract", "kernels -> app")]["status"] == "skipped"  # nothing applied yet
    assert checks(before)[("verify", "nothing checked")]["status"] == "failed"
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    result = run_kpatch(root, "verify", *cache, "--json")
    assert result.exit_code == 0 and checks(result)[("lock", str(root / "dist" / "pylock.toml"))]["status"] == "skipped"
    assert checks(result)[("contract", "kernels -> app")]["status"] == "passed"
    (report,) = gate(Workspace.create(load(root / "kpatch.toml"), tmp_path / "cache", None))
    assert report.ok and report.cuda_only == ("_C.cutlass_scaled_mm",)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def test_a_pr592_registration_is_reported_with_both_files_and_lines(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    bindings = root / "work" / "kernels" / "csrc" / "torch_bindings.cpp"
    edit(bindings, "Tensor? positions=None, Tensor? cos_sin_cache=None", "Tensor? positions, Tensor? cos_sin_cache")
    untouched = {p: p.read_bytes() for p in [root / "kpatch.toml", *sorted((root / "patches").rglob("*"))]
                 if p.is_file()}
    result = run_kpatch(root, "verify", *cache, "--json")
    assert result.exit_code == ExitCode.CONFLICT
    report = json.loads(result.stdout)["result"]["contracts"][0]["report"]
    (mismatch,) = report["mismatches"]
    app_line = next(i for i, line in enumerate((root / "work" / "app" / "csrc" / "torch_bindings.cpp")
                                               .read_text().splitlines(), 1) if "fused_kimi_mla_insert(" in line)
    kernels_line = next(i for i, line in enumerate(bindings.read_text().splitlines(), 1)
                        if "fused_kimi_mla_insert(" in line)
    assert (mismatch["op"], mismatch["breaking"]) == ("fused_kimi_mla_insert", True)
    assert mismatch["declared"] == {"file": "csrc/torch_bindings.cpp", "line": app_line}
    assert mismatch["registered"] == {"file": "csrc/torch_bindings.cpp", "line": kernels_line}
    assert [d["detail"] for d in mismatch["diffs"]] == ["arg 5 positions: default None vs none",
                                                         "arg 6 cos_sin_cache: default None vs none"]
    (unbound,) = report["unbound"]
    assert {k: unbound["call"][k] for k in ("file", "line", "function")} == {
        "file": "app/models/k3/xpu/ops.py", "line": 5, "function": "kimi_mla_insert"}
    human = run_kpatch(root, "verify", *cache)
    assert f"app csrc/torch_bindings.cpp:{app_line} vs kernels csrc/torch_bindings.cpp:{kernels_line}" in human.stdout
    assert untouched == {p: p.read_bytes() for p in untouched}
    # build-wheels' last step: the same contract as one exit-1 error naming the op and both places
    with pytest.raises(VerifyFailed) as caught:
        gate(Workspace.create(load(root / "kpatch.toml"), tmp_path / "cache", None))
    assert caught.value.exit_code == ExitCode.CONFLICT
    assert str(caught.value) == (
        f"op contract kernels -> app: _C.fused_kimi_mla_insert schema differs: arg 5 positions: default None vs "
        f"none (csrc/torch_bindings.cpp:{app_line} vs csrc/torch_bindings.cpp:{kernels_line}) (+1 more); "
        "'kpatch verify' shows the whole report")


def test_ops_not_served_on_xpu_are_grouped_by_calling_module(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    work = root / "work"
    edit(work / "kernels" / "csrc" / "torch_bindings.cpp", 'ops.impl("silu_and_mul", torch::kXPU',
         'ops.impl("silu_and_mul", torch::kCUDA')
    with (work / "app" / "app" / "models" / "k3" / "xpu" / "ops.py").open("a") as f:
        f.write("\n\ndef gather(x):\n    return torch.ops._C.gather_cache(x)\n")
    result = run_kpatch(root, "verify", *cache, "--json")
    assert result.exit_code == ExitCode.CONFLICT
    missing = json.loads(result.stdout)["result"]["contracts"][0]["report"]["missing"]
    assert [(m["module"], [(o["op"], o["gap"], o["keys"], [(c["file"], c["line"], c["function"]) for c in o["sites"]])
                           for o in m["ops"]]) for m in missing] == [
        ("app.models.k3.xpu.ops", [("gather_cache", "not defined by the kernels", [],
                                    [("app/models/k3/xpu/ops.py", 9, "gather")])]),
        ("app.ops", [("silu_and_mul", "defined, but no kernel for XPU", ["CUDA"],
                      [("app/ops.py", 11, "silu_and_mul")])])]
    human = run_kpatch(root, "verify", *cache)
    assert "app.models.k3.xpu.ops calls, not served on XPU:" in human.stdout
    # Listing them CUDA-only on purpose (one by op, one by module) makes the contract hold; a stale entry warns.
    toml = root / "kpatch.toml"
    toml.write_text(toml.read_text().rstrip().removesuffix("]") + '  { op = "silu_and_mul", why = "test" },\n'
                    '  { module = "app.models.k3.xpu", why = "test" },\n  { op = "no_such_op", why = "test" },\n]\n')
    stale = next(i for i, line in enumerate(toml.read_text().splitlines(), 1) if "no_such_op" in line)
    listed = run_kpatch(root, "verify", *cache, "--json")
    assert listed.exit_code == 0, listed.output
    warned = [c for c in json.loads(listed.stdout)["result"]["checks"] if c["status"] == "warning"]
    assert [c["detail"] for c in warned] == [
        f"[verify] cuda-only op no_such_op (kpatch.toml:{stale}): nothing it names is called on the XPU path any more"]


def test_the_installed_pair_verifies_and_says_which_lock_it_came_from(built: Built, site: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(site))
    result = built.verify("--installed", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    lock = built.root / "dist" / "pylock.toml"
    stacks = tomllib.loads(lock.read_text())["tool"]["kpatch"]["upstreams"]
    assert payload["provenance"] == {"lock": str(lock), "detail": f"installed from {lock}",
                                     "stacks": [[name, stacks[name]["stack-hash"]] for name in ("kernels", "app")]}
    found = checks(result)
    assert found[("record", "app")]["status"] == "passed"
    assert found[("patches", "app/0001-Route-k3-to-the-XPU-path.patch")]["status"] == "passed"
    assert found[("dispatcher", "vllm_xpu_kernels._C")]["status"] == "passed"
    assert {s for (area, s), c in found.items() if area == "dispatcher" and c["status"] == "passed"} >= {
        "_C::fused_kimi_mla_insert", "_C::rms_norm", "_C::silu_and_mul", "_C_cache_ops::concat_and_cache_mla"}
    assert "_C::cutlass_scaled_mm" not in {s for _, s in found}  # listed CUDA-only: not asked for


def test_only_one_half_installed_names_the_missing_one(built: Built, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    lock = built.root / "dist" / "pylock.toml"
    app = next(w for w in lockfile.read(lock).wheels if w.upstream == "app")
    kernels = next(w for w in lockfile.read(lock).wheels if w.upstream == "kernels")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                    str(tmp_path / "half"), str(lock.parent / app.filename)], check=True, capture_output=True)
    monkeypatch.syspath_prepend(str(tmp_path / "half"))
    result = built.verify("--installed", "--json")
    assert result.exit_code == ExitCode.CONFLICT
    missing = checks(result)[("installed", "vllm-xpu-kernels")]
    assert missing["detail"] == (f"only one half of the set is installed (app {app.version}); vllm-xpu-kernels "
                                 "is missing")
    assert missing["fix"] == f"pip install --force-reinstall --no-deps {lock.parent / kernels.filename}"
    assert json.loads(result.stdout)["result"]["provenance"]["lock"] is None


def test_a_changed_installed_file_fails_record_and_patch_checks(built: Built, site: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    changed = tmp_path / "site"
    shutil.copytree(site, changed)
    edit(changed / "app" / "models" / "k3" / "nvidia" / "metadata.py", "t.device.type != 'cpu'", "t.is_cuda")
    monkeypatch.syspath_prepend(str(changed))
    result = built.verify("--installed", "--json")
    assert result.exit_code == ExitCode.CONFLICT
    assert failures(result) == [
        "record app: 1 of 14 installed files differ from RECORD: app/models/k3/nvidia/metadata.py",
        "patches app/0002-XPU-Make-the-block-table-assert-device-generic.patch: not in the installed app: "
        "app/models/k3/nvidia/metadata.py"]


def test_an_environment_from_another_build_came_from_no_lock(built: Built, site: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    lock = copy_dist(built, tmp_path)
    content = lockfile.read(lock)
    app = next(w for w in content.wheels if w.upstream == "app")
    other = dataclasses.replace(app, version=app.version + "0", filename=app.filename.replace(app.version,
                                                                                            app.version + "0"))
    (lock.parent / app.filename).rename(lock.parent / other.filename)
    lockfile.write(lock.parent, dataclasses.replace(
        content, wheels=tuple(other if w.upstream == "app" else w for w in content.wheels)))
    monkeypatch.syspath_prepend(str(site))
    result = built.verify("--installed", "--lock", str(lock), "--json")
    assert result.exit_code == ExitCode.CONFLICT
    payload = json.loads(result.stdout)["result"]
    assert payload["provenance"] == {"lock": None, "stacks": [],
                                     "detail": f"not from {lock}: app is {app.version}, the lock has {other.version}"}
    assert checks(result)[("installed", "app")]["detail"] == f"{app.version} is installed, the lock has {other.version}"


def test_an_environment_torch_other_than_the_sets_fails(built: Built, site: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    lock = copy_dist(built, tmp_path)
    content = lockfile.read(lock)
    lockfile.write(lock.parent, dataclasses.replace(content, upstreams=tuple(
        dataclasses.replace(u, torch="2.14.0") for u in content.upstreams)))
    monkeypatch.syspath_prepend(str(site))
    result = built.verify("--installed", "--lock", str(lock), "--json")
    assert result.exit_code == ExitCode.CONFLICT
    import torch  # the test may import it; kpatch's own process never does

    environment = checks(result)[("torch", "environment")]
    assert environment["detail"] == f"torch {torch.__version__} is installed; the set was built against 2.14.0"
    assert environment["fix"] == "pip install torch==2.14.0"
    # the example's kernels were built in a venv of their own, with no torch: their wheel requires none
    assert ("torch", "kernels") not in checks(result)


def test_kpatch_itself_never_imports_torch(built: Built, site: Path) -> None:
    """Only the child Python of the dispatcher probe imports torch; verify --installed leaves kpatch's own alone."""
    code = ("import sys\nfrom kpatch.cli import main\ntry:\n    main(['verify', '--installed', '--cache-dir', "
            f"{str(built.cache)!r}])\nexcept SystemExit as done:\n    code = done.code\n"
            "print('torch imported' if 'torch' in sys.modules else f'exit {code}, torch not imported')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=built.root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)}, check=False)
    *report, last = done.stdout.strip().splitlines()
    assert last == "exit 0, torch not imported", done.stdout[-2000:] + done.stderr[-2000:]
    assert "verify passed" in report[-1] and any("dispatcher" in line for line in report)
