"""Hostile input, round three (issue 37): every user-named file is read with a bound. kpatch.toml, a series file, a
patch file (in the project, or one `import --series` takes) that is a FIFO, a device such as /dev/zero or a runaway
file is refused before it is read: a FIFO waited for a writer forever, /dev/zero was read until memory ran out. Each
refusal is one line naming the file, exit 2, and the project stays as it was.

kpatch runs as its own process here (tests/support/cli.py), with a timeout: on the old code a FIFO hangs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from kpatch.files import BUILD_FILE, GITIGNORE, KPATCH_TOML, PATCH_FILE, SERIES_FILE, Bound
from tests.git.test_security_three import NEW_FILE, one_error
from tests.support.cli import kpatch
from tests.support.gitrepos import Project

HOSTILE = ("fifo", "device", "huge")


def _plant(path: Path, hostile: str, bound: Bound) -> str:
    """Put a hostile `hostile` at `path` (a FIFO, a symlink to /dev/zero, a sparse file one byte over `bound`):
    what the one error line says of it."""
    path.unlink(missing_ok=True)
    if hostile == "fifo":
        os.mkfifo(path)
        return f"{path} is a FIFO, not a regular file: not a {bound.what} kpatch reads"
    if hostile == "device":
        path.symlink_to("/dev/zero")
        return f"{path} is a device, not a regular file: not a {bound.what} kpatch reads"
    with path.open("wb") as handle:  # sparse: no disk used
        handle.truncate(bound.limit + 1)
    return f"{path} is larger than {bound.limit // 2**20} MiB: not a {bound.what} kpatch reads"


def _refused(project: Project, args: list[str], said: str) -> None:
    before = project.snapshot()
    ran = kpatch(project.root, *args, timeout=60)
    one_error(ran, ExitCode.BAD_INPUT, said)
    assert project.snapshot() == before


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("command", [["status"], ["apply"]])
def test_a_kpatch_toml_that_is_a_fifo_a_device_or_too_big_is_refused_naming_it(
        project: Project, hostile: str, command: list[str]) -> None:
    """A FIFO named kpatch.toml was passed over ("no kpatch.toml here or above") or, named with --config, waited
    on forever; /dev/zero was read until memory ran out."""
    said = _plant(project.root / "kpatch.toml", hostile, KPATCH_TOML)
    _refused(project, command, said)


def test_a_config_option_naming_dev_zero_is_refused_without_reading_it(project: Project) -> None:
    _refused(project, ["status", "--config", "/dev/zero"],
             "/dev/zero is a device, not a regular file: not a kpatch.toml kpatch reads")


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_series_file_that_is_a_fifo_a_device_or_too_big_is_refused_naming_it(project: Project,
                                                                                hostile: str) -> None:
    """A series that was no regular file was read as no series at all: every patch "not listed in it"."""
    said = _plant(project.root / "patches" / "kernels" / "series", hostile, SERIES_FILE)
    _refused(project, ["apply"], said)


@pytest.mark.parametrize("hostile", ["fifo", "huge"])
def test_a_patch_file_that_is_a_fifo_or_too_big_is_refused_naming_it(project: Project, hostile: str) -> None:
    """A FIFO patch file was "does not exist"; a runaway one was read whole, as many times as it is parsed."""
    (first,) = sorted((project.root / "patches" / "kernels").glob("0001-*.patch"))
    said = _plant(first, hostile, PATCH_FILE)
    _refused(project, ["apply"], said)


@pytest.mark.parametrize(("planted", "hostile"), [("series", h) for h in HOSTILE] + [("0001-a.patch", "fifo"),
                                                                                    ("0001-a.patch", "huge")])
def test_import_series_refuses_a_series_or_patch_file_that_is_a_fifo_a_device_or_too_big(
        project: Project, tmp_path: Path, planted: str, hostile: str) -> None:
    folder = tmp_path / "quilt"
    folder.mkdir()
    (folder / "0001-a.patch").write_text("Subject: A\n\n" + NEW_FILE)
    (folder / "series").write_text("0001-a.patch\n")
    said = _plant(folder / planted, hostile, SERIES_FILE if planted == "series" else PATCH_FILE)
    _refused(project, ["import", "kernels", "--series", str(folder), "--author", "A U Thor <a@example.org>"], said)


def test_init_refuses_a_gitignore_too_big_to_read_and_writes_nothing(project: Project, tmp_path: Path) -> None:
    """init reads the folder's .gitignore to add its lines: a runaway one was read whole."""
    new = tmp_path / "new"
    new.mkdir()
    said = _plant(new / ".gitignore", "huge", GITIGNORE)
    ran = kpatch(new, "init", "--upstream", f"kernels={project.kernels}@{project.kernels_base}", timeout=60)
    one_error(ran, ExitCode.BAD_INPUT, said)
    assert sorted(p.name for p in new.iterdir()) == [".gitignore"]
    assert (new / ".gitignore").stat().st_size == GITIGNORE.limit + 1


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_projects_build_script_that_is_a_fifo_a_device_or_too_big_is_refused_naming_it(
        project: Project, hostile: str) -> None:
    """A project's own scripts/build-wheel.sh (or docker/Dockerfile) overrides kpatch's: a FIFO there was passed
    over for kpatch's own without a word, /dev/zero read until memory ran out."""
    (project.root / "scripts").mkdir(exist_ok=True)
    said = _plant(project.root / "scripts" / "build-wheel.sh", hostile, BUILD_FILE)
    assert kpatch(project.root, "apply").exit_code == 0
    _refused(project, ["build-wheels", "--backend", "local"], said)


@pytest.mark.parametrize("hostile", ["device", "huge"])
def test_an_apps_requirements_file_too_big_or_a_device_is_refused_naming_it_when_verify_reads_its_pin(
        tmp_path: Path, hostile: str) -> None:
    """verify reads the kernels pin from the app's requirements file (upstream text): /dev/zero behind a link
    there was read until memory ran out."""
    from kpatch.errors import UsageError
    from kpatch.files import REQUIREMENTS_FILE
    from kpatch.verify.pairs import pinned_kernels

    (tmp_path / "requirements").mkdir()
    said = _plant(tmp_path / "requirements" / "xpu.txt", hostile, REQUIREMENTS_FILE)
    with pytest.raises(UsageError) as refused:
        pinned_kernels(tmp_path, "vllm_xpu_kernels", "requirements/xpu.txt")
    assert str(refused.value) == said


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_release_ledger_that_is_a_fifo_a_device_or_too_big_is_refused_naming_it(tmp_path: Path,
                                                                                  hostile: str) -> None:
    """The release index's ledger (releases.json) is read back by every release and yank."""
    from kpatch.errors import LockError
    from kpatch.files import LEDGER_FILE
    from kpatch.wheels.release import LEDGER, read_ledger

    said = _plant(tmp_path / LEDGER, hostile, LEDGER_FILE)
    with pytest.raises(LockError) as refused:
        read_ledger(tmp_path)
    assert str(refused.value) == said


def test_a_nightly_report_that_is_a_fifo_is_said_unread_in_a_proposals_evidence(tmp_path: Path) -> None:
    """propose quotes the last nightly's contract from reports/nightly/report.json: a FIFO there hung it."""
    from kpatch.adopt.pull_text import _contract

    report = tmp_path / "report.json"
    os.mkfifo(report)
    assert _contract(report) == "- Op contract: not read (report.json is no nightly report kpatch reads)"
    report.unlink()
    assert _contract(report) == "- Op contract: not run (no nightly report)"
