"""`kpatch release --to DIR` as a person sees it: the example pair built for real (--backend local), released into
a folder served by http.server on 127.0.0.1, and installed from there in fresh venvs by real pip and real uv."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from click.testing import Result
from packaging.pylock import Pylock
from packaging.version import Version

from kpatch.errors import BuildError, ExitCode
from kpatch.examples.upstreams import make_example_project
from kpatch.wheels import lock as lockfile
from kpatch.wheels.release import Target, publish, url_lock
from tests.support.cli import run_kpatch
from tests.support.example_toml import with_build_key
from tests.support.json_envelope import checked
from tests.support.wheelfiles import torch_standin

UV = [sys.executable, "-m", "uv"]
QUIET_PIP = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1", "PIP_CONFIG_FILE": os.devnull}


@dataclass(frozen=True)
class Sets:
    """The example project with two built sets: dist/ (the first) and dist2/ (the second, another app build)."""

    root: Path
    cache: Path
    first: Path
    second: Path

    def kpatch(self, *args: str) -> Result:
        return run_kpatch(self.root, *args, "--cache-dir", str(self.cache))


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory, build_env: dict[str, str]) -> Iterator[Sets]:
    """The example applied and two sets built once for the module: the second with another app build key (the
    kernels wheel is the same file in both)."""
    yield from build_sets(tmp_path_factory.mktemp("release"), build_env)


def build_sets(root: Path, build_env: Mapping[str, str]) -> Iterator[Sets]:
    """The example project in `root` with its two sets built (see `sets`); `build_env`: the run's seed venv and
    compiler cache (tests/conftest.py)."""
    with pytest.MonkeyPatch.context() as env:  # the per-test isolation fixture does not cover module fixtures
        (root / "home").mkdir()
        (root / "home" / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.invalid\n")
        env.setenv("HOME", str(root / "home"))
        env.setenv("XDG_CACHE_HOME", str(root / "home" / ".cache"))
        env.setenv("GIT_CONFIG_GLOBAL", str(root / "home" / ".gitconfig"))
        for key, value in build_env.items():  # the run's seed venv and compiler cache, as each test gets them
            env.setenv(key, value)
        project = make_example_project(root).root
        made = Sets(project, root / "cache", project / "dist", project / "dist2")
        assert made.kpatch("apply").exit_code == 0
        built = made.kpatch("build-wheels", "--backend", "local")
        assert built.exit_code == 0, built.output
        toml = project / "kpatch.toml"
        text = toml.read_text()
        toml.write_text(with_build_key(text, "app", 'env = { APP_FLAVOUR = "second" }'))
        again = made.kpatch("build-wheels", "--backend", "local", "--out", str(made.second))
        assert again.exit_code == 0, again.output
        toml.write_text(text)
        yield made


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the base class's name
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on 127.0.0.1 (a thread of this process), and its URL."""
    folder = tmp_path / "site"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def release(sets: Sets, site: Path, url: str, *args: str, code: int = 0) -> dict[str, object]:
    ran = sets.kpatch("release", "--to", str(site), "--base-url", url, "--json", *args)
    assert ran.exit_code == code, ran.output
    envelope = checked(ran.stdout, "release")
    return envelope["result"] if code == 0 else envelope["error"]  # type: ignore[no-any-return]


def venv(path: Path, *, with_pip: bool = False) -> Path:
    subprocess.run([sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), str(path)], check=True)
    return path / "bin" / "python"


def pip(args: list[str], *, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True, env={**env, **QUIET_PIP})


def pip_into(target: Path, command: str) -> subprocess.CompletedProcess[str]:
    """The printed `pip install ...` command, run by real pip into a fresh folder on no other index."""
    words = command.replace("'", "").split()
    assert words[:2] == ["pip", "install"]
    return pip(["install", "--target", str(target), *words[2:]])


def installed(target: Path) -> dict[str, str]:
    """What a folder pip installed into holds, as `import` sees it: each package's module and version."""
    code = ("import app, vllm_xpu_kernels, importlib.metadata as m, json; "
            "print(json.dumps({n: m.version(n) for n in ('app', 'vllm-xpu-kernels')}))")
    ran = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {code}"],
                         capture_output=True, text=True, check=True)
    return json.loads(ran.stdout)  # type: ignore[no-any-return]


def versions(index: str, package: str) -> str:
    ran = pip(["index", "versions", "--index-url", index, package])
    assert ran.returncode == 0, ran.stderr
    return next(line for line in ran.stdout.splitlines() if line.startswith("Available versions:"))


def installs_as_printed(sets: Sets, result: Mapping[str, object], tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The released set of dist/ installed as a person would, with the two commands `release` printed: real pip
    and real uv, each into a fresh venv; both hold exactly the set, and `kpatch verify --installed` passes on
    what pip installed."""
    wanted = {w.package: w.version for w in lockfile.read(sets.first / "pylock.toml").wheels}
    # real pip in a fresh venv, with the one printed command: it pulls exactly the kernels through the app's ==
    python = venv(tmp_path / "pip-venv", with_pip=True)
    words = str(result["pip_command"]).replace("'", "").split()
    ran = pip(words[1:], python=str(python))
    assert ran.returncode == 0, ran.stderr
    shown = subprocess.run([str(python), "-c", "import app, vllm_xpu_kernels, importlib.metadata as m; "
                            "print(m.version('app'), m.version('vllm-xpu-kernels'))"],
                           capture_output=True, text=True, check=True)
    assert shown.stdout.split() == [wanted["app"], wanted["vllm-xpu-kernels"]]
    # and what pip installed from the index is the set kpatch verified: `verify --installed` there passes
    monkeypatch.syspath_prepend(str(next((tmp_path / "pip-venv" / "lib").glob("python*/site-packages"))))
    verified = sets.kpatch("verify", "--installed", "--json")
    assert verified.exit_code == 0, verified.output
    assert json.loads(verified.stdout)["result"]["provenance"]["lock"] == str(sets.first / "pylock.toml")
    # real uv, with the printed command, into a fresh venv
    python = venv(tmp_path / "uv-venv")
    env = {**os.environ, "UV_NO_CACHE": "1", "UV_NO_CONFIG": "1"}
    command = str(result["uv_command"]).split()
    assert command[:3] == ["uv", "pip", "install"]
    uv = subprocess.run([*UV, "pip", "install", "--python", str(python), *command[3:]], capture_output=True,
                        text=True, env=env)
    assert uv.returncode == 0, uv.stderr
    listed = subprocess.run([*UV, "pip", "list", "--format", "json", "--python", str(python)], capture_output=True,
                            text=True, check=True, env=env)
    assert {p["name"]: p["version"] for p in json.loads(listed.stdout)} == wanted
    subprocess.run([str(python), "-c", "import app, vllm_xpu_kernels"], check=True)


def test_a_release_is_an_index_pip_and_uv_install_the_set_from_over_http(
        sets: Sets, served: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, url = served
    lock = lockfile.read(sets.first / "pylock.toml")
    result = release(sets, site, url)
    app = next(w for w in lock.wheels if w.upstream == "app")
    assert result["index_url"] == f"{url}/stable/simple" and result["version"] == app.version
    assert result["pip_command"] == f"pip install --index-url {url}/stable/simple 'app=={app.version}'"
    # PEP 503 and PEP 691 pages, sha256 in every link, PEP 658 metadata beside each wheel
    for wheel in lock.wheels:
        page = (site / "stable" / "simple" / wheel.package / "index.html").read_text()
        assert f"{wheel.filename}#sha256={wheel.sha256}" in page
        meta = (site / "stable" / "files" / f"{wheel.filename}.metadata").read_bytes()
        assert f'data-core-metadata="sha256={hashlib.sha256(meta).hexdigest()}"' in page
        assert f"Version: {wheel.version}" in meta.decode()
        listing = json.loads((site / "stable" / "simple" / wheel.package / "index.json").read_text())
        assert listing["meta"]["api-version"] == "1.1" and listing["versions"] == [wheel.version]
        assert listing["files"][0]["hashes"] == {"sha256": wheel.sha256} and listing["files"][0]["yanked"] is False
    # the release's lock: every wheel by URL, valid PEP 751
    folder = Path(str(result["folder"]))
    data = tomllib.loads((folder / "pylock.toml").read_text())
    Pylock.from_dict(data)
    assert [w["url"] for p in data["packages"] for w in p["wheels"]] == [
        f"{url}/stable/files/{w.filename}" for w in lock.wheels]
    notes = (folder / "NOTES.md").read_text()
    assert str(result["pip_command"]) in notes and str(result["uv_command"]) in notes
    assert "Upstream-PR vllm-project/vllm#56462" in notes and "kpatch verify: " in notes
    installs_as_printed(sets, result, tmp_path, monkeypatch)


LINE = "0.9"


@contextmanager
def line_declared(sets: Sets) -> Iterator[None]:
    """The built project with a release line LINE declared for the block (main's branches and bases, its own copy
    of main's stacks), so `--line LINE` releases a built set (dist2/) as that line's."""
    toml = sets.root / "kpatch.toml"
    text = toml.read_text()
    bases = {u["name"]: u["base"] for u in tomllib.loads(text)["upstream"]}
    for name in bases:
        shutil.copytree(sets.root / "patches" / name, sets.root / "patches" / LINE / name)
    toml.write_text(text + "".join(f'\n[line."{LINE}".{name}]\nbranch = "main"\nbase = "{base}"\n'
                                   for name, base in bases.items()))
    try:
        yield
    finally:
        toml.write_text(text)
        shutil.rmtree(sets.root / "patches" / LINE)


def test_a_release_line_is_its_own_channel_pip_on_one_lines_index_never_gets_the_others_set(
        sets: Sets, served: tuple[Path, str], tmp_path: Path) -> None:
    """`--line 0.9` publishes into DIR/0.9/<channel>/, beside main's DIR/<channel>/: each index lists its own
    line's set only, the printed commands and the notes name the line, a tag stays one release across lines, and
    a yank on the line leaves main's index as it was."""
    site, url = served
    main = release(sets, site, url, "--tag", "m-1")
    with line_declared(sets):
        line = release(sets, site, url, "--line", LINE, "--tag", "l-1", "--lock", str(sets.second / "pylock.toml"))
        assert main["line"] == "main" and main["index_url"] == f"{url}/stable/simple"
        assert line["line"] == LINE and line["index_url"] == f"{url}/{LINE}/stable/simple"
        assert line["pip_command"] == f"pip install --index-url {url}/{LINE}/stable/simple 'app=={line['version']}'"
        assert line["uv_command"] == f"uv pip install -r {url}/{LINE}/stable/releases/l-1/pylock.toml"
        assert Path(str(line["folder"])) == site.resolve() / LINE / "stable" / "releases" / "l-1"
        assert (Path(str(line["folder"])) / "NOTES.md").read_text().startswith(
            f"# app {line['version']} (line {LINE}, stable, l-1)")
        # real pip over HTTP: each line's index lists its own set only, and the printed command installs it
        assert versions(f"{url}/stable/simple", "app") == f"Available versions: {main['version']}"
        assert versions(f"{url}/{LINE}/stable/simple", "app") == f"Available versions: {line['version']}"
        target = tmp_path / "line"
        assert pip_into(target, str(line["pip_command"])).returncode == 0
        assert installed(target)["app"] == line["version"]
        # a tag is released once across every line and channel of DIR
        taken = release(sets, site, url, "--line", LINE, "--tag", "m-1", "--lock",
                        str(sets.second / "pylock.toml"), code=ExitCode.BAD_INPUT)
        assert str(taken["message"]).startswith("tag m-1 is already released on channel stable (app ")
        # the yank is the line's: main's index is untouched
        main_pages = sorted((p, p.read_bytes()) for p in (site / "stable").rglob("*") if p.is_file())
        yanked = release(sets, site, url, "--line", LINE, "--yank", "l-1", "--why", "breaks the 0.9 sampler")
        unknown = sets.kpatch("release", "--line", LINE, "--to", str(site), "--base-url", url, "--yank", "l-9",
                              "--why", "x")
    assert yanked["line"] == LINE and yanked["yanked"] == "breaks the 0.9 sampler"
    assert sorted((p, p.read_bytes()) for p in (site / "stable").rglob("*") if p.is_file()) == main_pages
    assert 'data-yanked="l-1: breaks the 0.9 sampler"' in (site / LINE / "stable" / "simple" / "app" /
                                                          "index.html").read_text()
    assert versions(f"{url}/stable/simple", "app") == f"Available versions: {main['version']}"
    assert unknown.exit_code == ExitCode.BAD_INPUT and \
        f"no release 'l-9' on channel stable of line {LINE} in {site.resolve() / LINE / 'stable'} (released: l-1)" \
        in unknown.output

def test_a_set_that_does_not_verify_is_refused_and_nothing_is_published(sets: Sets, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    shutil.copytree(sets.first, dist)
    wheel = next(dist.glob("app-*.whl"))
    data = wheel.read_bytes()
    wheel.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    error = release(sets, tmp_path / "site", "http://127.0.0.1:9", "--lock", str(dist / "pylock.toml"),
                    code=ExitCode.CONFLICT)
    assert str(error["message"]).startswith("the set does not verify (1 failed check(s), first wheel "
                                            f"{wheel.name}: sha256 ")
    assert not (tmp_path / "site").exists()


def test_a_tag_or_a_version_released_before_is_refused_naming_the_release(sets: Sets, tmp_path: Path) -> None:
    site = tmp_path / "site"
    first = release(sets, site, "http://127.0.0.1:9", "--tag", "k3-1")
    before = sorted((p, p.read_bytes()) for p in site.rglob("*") if p.is_file())
    again = release(sets, site, "http://127.0.0.1:9", "--tag", "k3-1", "--lock", str(sets.second / "pylock.toml"),
                    code=ExitCode.BAD_INPUT)
    assert str(again["message"]).startswith("tag k3-1 is already released on channel stable (app ")
    same = release(sets, site, "http://127.0.0.1:9", "--tag", "k3-2", code=ExitCode.BAD_INPUT)
    assert same["message"] == (f"app {first['version']} is already released on channel stable as k3-1: releases "
                               "are immutable; build a new set (kpatch build-wheels) first")
    assert sorted((p, p.read_bytes()) for p in site.rglob("*") if p.is_file()) == before


def test_a_second_release_rewrites_only_its_pages_and_a_yanked_one_is_skipped_by_pip(
        sets: Sets, served: tuple[Path, str], tmp_path: Path) -> None:
    site, url = served
    index = f"{url}/stable/simple"
    first = release(sets, site, url, "--tag", "k3-1")
    assert sorted(first["pages_written"]) == sorted(  # type: ignore[call-overload]
        f"simple/{p}" for p in ("index.html", "index.json", "app/index.html", "app/index.json",
                                "vllm-xpu-kernels/index.html", "vllm-xpu-kernels/index.json"))
    kernels_page = site / "stable" / "simple" / "vllm-xpu-kernels" / "index.html"
    inode = kernels_page.stat().st_ino
    second = release(sets, site, url, "--tag", "k3-2", "--lock", str(sets.second / "pylock.toml"))
    assert second["pages_written"] == ["simple/app/index.html", "simple/app/index.json"]  # the kernels are the same
    assert kernels_page.stat().st_ino == inode
    # both versions differ only in their local label: pip's newest of the two is the higher label, not the later
    newer, older = sorted([first, second], key=lambda r: Version(str(r["version"])), reverse=True)
    assert versions(index, "app") == f"Available versions: {newer['version']}, {older['version']}"
    newest = tmp_path / "newest"
    assert pip_into(newest, f"pip install --index-url {index} app").returncode == 0
    assert installed(newest)["app"] == newer["version"]
    yanked = release(sets, site, url, "--yank", str(newer["tag"]), "--why", "breaks fp8 KV cache")
    assert yanked["yanked"] == "breaks fp8 KV cache"
    assert yanked["pages_written"] == ["simple/app/index.html", "simple/app/index.json"]
    page = (site / "stable" / "simple" / "app" / "index.html").read_text()
    assert f'data-yanked="{newer["tag"]}: breaks fp8 KV cache"' in page
    assert versions(index, "app") == f"Available versions: {older['version']}"
    skipped = tmp_path / "skipped"
    assert pip_into(skipped, f"pip install --index-url {index} app").returncode == 0
    assert installed(skipped)["app"] == older["version"]
    pinned = tmp_path / "pinned"
    ran = pip_into(pinned, f"pip install --index-url {index} app=={newer['version']}")
    assert ran.returncode == 0 and "yanked" in ran.stderr.lower()
    assert installed(pinned)["app"] == newer["version"]


def test_the_nightly_channel_lists_its_last_keep_sets_and_the_older_files_stay(
        sets: Sets, served: tuple[Path, str]) -> None:
    site, url = served
    toml = sets.root / "kpatch.toml"
    text = toml.read_text()
    toml.write_text(text + "\n[release]\nkeep = 1\n")
    try:
        first = release(sets, site, url, "--channel", "nightly", "--tag", "n1")
        second = release(sets, site, url, "--channel", "nightly", "--tag", "n2", "--lock",
                         str(sets.second / "pylock.toml"))
    finally:
        toml.write_text(text)
    assert first["listed"] == ["n1"] and second["listed"] == ["n2"] and second["left_index"] == ["n1"]
    index = f"{url}/nightly/simple"
    assert versions(index, "app") == f"Available versions: {second['version']}"
    assert versions(index, "vllm-xpu-kernels").startswith("Available versions: 1.0+kpatch.")  # n2 holds it too
    old = lockfile.read(sets.first / "pylock.toml").wheels
    assert all((site / "nightly" / "files" / w.filename).is_file() for w in old)  # its assets stay
    assert (site / "nightly" / "releases" / "n1" / "pylock.toml").is_file()


def test_a_yank_of_an_unknown_tag_names_the_released_ones(sets: Sets, tmp_path: Path) -> None:
    site = tmp_path / "site"
    release(sets, site, "http://127.0.0.1:9", "--tag", "k3-1")
    error = release(sets, site, "http://127.0.0.1:9", "--yank", "k3-9", "--why", "x", code=ExitCode.BAD_INPUT)
    assert error["message"] == f"no release 'k3-9' on channel stable in {site.resolve() / 'stable'} (released: k3-1)"


def test_release_to_in_kpatch_toml_is_the_default_and_to_on_the_command_line_overrides_it(
        sets: Sets, tmp_path: Path) -> None:
    toml = sets.root / "kpatch.toml"
    text = toml.read_text()
    try:
        toml.write_text(text + '\n[release]\nto = "site-from-toml"\nurl = "https://example.org/k3"\n')
        ran = sets.kpatch("release", "--json", "--tag", "from-toml")
        assert ran.exit_code == 0, ran.output
        assert checked(ran.stdout, "release")["result"]["folder"] == str(
            sets.root / "site-from-toml" / "stable" / "releases" / "from-toml")
        other = tmp_path / "site-given"
        ran = sets.kpatch("release", "--json", "--tag", "given", "--to", str(other))
        assert ran.exit_code == 0, ran.output
        assert (other / "stable" / "releases" / "given" / "pylock.toml").is_file()
        assert not (sets.root / "site-from-toml" / "stable" / "releases" / "given").exists()
        toml.write_text(text + '\n[release]\nto = "GitHub"\n')
        ran = sets.kpatch("release", "--tag", "bad")
        assert ran.exit_code == ExitCode.BAD_INPUT, ran.output
        (line,) = ran.output.strip().splitlines()
        assert str(toml) in line and "[release] 'to'" in line and "GitHub" in line
    finally:
        shutil.rmtree(sets.root / "site-from-toml", ignore_errors=True)
        toml.write_text(text)
    ran = sets.kpatch("release", "--tag", "nowhere")
    assert ran.exit_code == ExitCode.BAD_INPUT, ran.output
    assert ran.output.strip().splitlines()[0].endswith(
        'kpatch release needs --to DIR|github, or [release] to = DIR|"github" in kpatch.toml')


def test_a_set_built_against_torch_locks_torch_from_its_index_as_the_third_member(
        sets: Sets, served: tuple[Path, str], tmp_path: Path) -> None:
    """The release lock names torch's wheel on the torch index (here a local one, as [release] torch-index would
    name it) by URL and sha256, and uv installs the three from it."""
    site, url = served
    name, data = torch_standin("2.14.0")
    (site / "torch-index" / "torch").mkdir(parents=True)
    (site / "torch-index" / "torch" / name).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    (site / "torch-index" / "torch" / "index.html").write_text(
        f'<a href="{name.replace("+", "%2B")}#sha256={digest}">{name}</a>\n<a href="torch-1.0-py3-none-any.whl'
        f'#sha256={"0" * 64}">torch-1.0-py3-none-any.whl</a>\n')
    torch = str(Version(name.split("-")[1]))
    lock = dataclasses.replace(lockfile.read(sets.first / "pylock.toml"), set_torch=torch)
    shutil.copytree(sets.first, site / "stable" / "files")
    target = Target(out=site, channel="stable", base_url=url, torch_index=f"{url}/torch-index", keep=None)
    text = url_lock(target, lock, torch)
    locked = tomllib.loads(text.decode())
    Pylock.from_dict(locked)
    third = locked["packages"][2]
    assert (third["name"], third["version"], third["index"]) == ("torch", torch, f"{url}/torch-index")
    assert third["wheels"] == [{"name": name, "url": f"{url}/torch-index/torch/{name.replace('+', '%2B')}",
                                "hashes": {"sha256": digest}}]
    (site / "pylock.toml").write_bytes(text)
    python = venv(tmp_path / "venv")
    env = {**os.environ, "UV_NO_CACHE": "1", "UV_NO_CONFIG": "1"}
    uv = subprocess.run([*UV, "pip", "install", "--python", str(python), "-r", f"{url}/pylock.toml"],
                        capture_output=True, text=True, env=env)
    assert uv.returncode == 0, uv.stderr
    listed = subprocess.run([*UV, "pip", "list", "--format", "json", "--python", str(python)], capture_output=True,
                            text=True, check=True, env=env)
    assert {p["name"]: p["version"] for p in json.loads(listed.stdout)} == {
        **{w.package: w.version for w in lock.wheels}, "torch": torch}


def test_a_torch_index_that_cannot_be_read_stops_the_release_before_anything_is_written(
        sets: Sets, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    shutil.copytree(sets.first, dist)
    lockfile.write(dist, dataclasses.replace(lockfile.read(dist / "pylock.toml"), set_torch="2.14.0"))
    site = tmp_path / "site"
    release(sets, site, "http://127.0.0.1:9", "--tag", "k3-1", "--lock", str(sets.second / "pylock.toml"))
    before = sorted((p, p.read_bytes()) for p in site.rglob("*") if p.is_file())
    target = Target(out=site, channel="stable", base_url="http://127.0.0.1:9", torch_index="http://127.0.0.1:9/t",
                    keep=None)
    with pytest.raises(BuildError) as err:
        publish(target, dist / "pylock.toml", "k3-torch", "")
    assert str(err.value).startswith("cannot read the torch index http://127.0.0.1:9/t/torch/: ")
    assert sorted((p, p.read_bytes()) for p in site.rglob("*") if p.is_file()) == before


def test_release_prints_the_one_install_command_for_pip_and_for_uv(sets: Sets, tmp_path: Path) -> None:
    ran = sets.kpatch("release", "--to", str(tmp_path / "site"), "--base-url", "https://example.org/k3")
    assert ran.exit_code == 0, ran.output
    app = next(w for w in lockfile.read(sets.first / "pylock.toml").wheels if w.upstream == "app")
    tag = "v" + app.version.replace("+", "-")
    assert ran.stdout.splitlines()[-4:] == [
        "install it with pip:", f"  pip install --index-url https://example.org/k3/stable/simple 'app=={app.version}'",
        "or with uv, exactly the locked set:",
        f"  uv pip install -r https://example.org/k3/stable/releases/{tag}/pylock.toml"]
    assert ran.stdout.startswith(f"released app {app.version} as {tag} on stable: ")


@pytest.fixture(scope="module")
def other_kernels(sets: Sets, build_env: dict[str, str]) -> Path:
    """A third set, dist3/: another kernels build (so another kernels version, and an app pinned to it)."""
    out = sets.root / "dist3"
    with pytest.MonkeyPatch.context() as env:
        for key, value in build_env.items():
            env.setenv(key, value)
        home = sets.root.parent / "home"
        env.setenv("HOME", str(home))
        env.setenv("XDG_CACHE_HOME", str(home / ".cache"))
        env.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
        toml = sets.root / "kpatch.toml"
        text = toml.read_text()
        toml.write_text(with_build_key(text, "kernels", 'env = { KERNELS_FLAVOUR = "third" }'))
        try:
            built = sets.kpatch("build-wheels", "--backend", "local", "--out", str(out))
        finally:
            toml.write_text(text)
        assert built.exit_code == 0, built.output
    return out


def test_verify_installed_in_a_venv_mixing_two_releases_fails_naming_both_sets(
        sets: Sets, other_kernels: Path, served: tuple[Path, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    site, url = served
    first, third = lockfile.read(sets.first / "pylock.toml"), lockfile.read(other_kernels / "pylock.toml")
    app = next(w for w in first.wheels if w.upstream == "app")
    kernels = next(w for w in third.wheels if w.upstream == "kernels")
    assert kernels.version != next(w for w in first.wheels if w.upstream == "kernels").version
    release(sets, site, url, "--tag", "set-a")
    release(sets, site, url, "--tag", "set-b", "--lock", str(other_kernels / "pylock.toml"))
    # app from release A and the kernels from release B, from the served index by real pip
    mixed = tmp_path / "mixed"
    ran = pip(["install", "--target", str(mixed), "--no-deps", "--index-url", f"{url}/stable/simple",
               f"app=={app.version}", f"vllm-xpu-kernels=={kernels.version}"])
    assert ran.returncode == 0, ran.stderr
    assert installed(mixed) == {"app": app.version, "vllm-xpu-kernels": kernels.version}
    monkeypatch.syspath_prepend(str(mixed))
    verified = sets.kpatch("verify", "--installed", "--json")  # against release A's set (dist/pylock.toml)
    assert verified.exit_code == ExitCode.CONFLICT, verified.output
    found = {(c["area"], c["subject"]): c for c in json.loads(verified.stdout)["result"]["checks"]}
    mixing = found[("installed", "set")]
    assert mixing["status"] == "failed"
    assert mixing["detail"].startswith("the environment mixes two sets: ")
    assert f"app {app.version} from this lock's set" in mixing["detail"]
    assert f"vllm-xpu-kernels {kernels.version} from another set" in mixing["detail"]
    human = sets.kpatch("verify", "--installed")
    assert "the environment mixes two sets" in human.stdout and kernels.version in human.stdout
