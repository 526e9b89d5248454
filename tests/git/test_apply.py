"""kpatch apply on real repositories: order, reproducibility, conflicts, --continue, --abort, refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit
from tests.support.cli import KPATCH
from tests.support.gitrepos import Project, forget_held_files, git, kill_inside_git_am, mirror_dir


def test_applies_kernels_first_and_reproducibly(project: Project) -> None:
    result = project.run("apply", "--json")
    assert result.exit_code == 0, result.output
    stacks = json.loads(result.stdout)["result"]["stacks"]
    assert [s["upstream"] for s in stacks] == ["kernels", "app"]
    assert all(s["outcome"] == "applied" and s["applied"] == s["total"] == 2 for s in stacks)
    assert stacks[1]["base"] == project.app_base  # the tag v1.0 resolved
    heads = {s["upstream"]: s["head"] for s in stacks}
    subject = git(project.workdir / "app", "log", "--format=%s", "-1")
    assert subject == "[XPU] Make the block-table assert device-generic"
    # Same base + same patches -> same SHAs, in the same worktree and in a fresh one.
    again = json.loads(project.run("apply", "--json").stdout)["result"]["stacks"]
    assert {s["upstream"]: s["head"] for s in again} == heads
    fresh = json.loads(project.run("apply", "--json", "--workdir", str(project.root / "w2")).stdout)["result"]["stacks"]
    assert {s["upstream"]: s["head"] for s in fresh} == heads


def test_round_trip_export_is_byte_identical(project: Project) -> None:
    before = project.snapshot()
    assert project.run("apply").exit_code == 0
    check = project.run("export", "--check")
    assert check.exit_code == 0, check.output
    assert project.run("export").exit_code == 0
    after = project.snapshot()
    patch_files = [k for k in before if k.startswith("patches/")]
    assert patch_files and all(before[k] == after[k] for k in patch_files)


def test_export_check_finds_a_changed_commit(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    tree = project.workdir / "kernels"
    git(tree, "checkout", "-q", "HEAD~1")
    commit(tree, {"tests/test_kimi.py": "def test_kimi():\n    assert 2 + 2 == 4\n"},
           "Test the kimi op\n\nUpstream-Status: pending\n", 5000)
    check = project.run("export", "--check")
    assert check.exit_code == ExitCode.CONFLICT
    assert "0002-Test-the-kimi-op.patch" in check.stdout and "modified" in check.stdout
    status = json.loads(project.run("status", "--json").stdout)["result"]["upstreams"]
    kernels = next(u for u in status if u["upstream"] == "kernels")
    assert [p["state"] for p in kernels["patches"]] == ["applied", "modified"]
    assert project.run("export", "kernels").exit_code == 0
    assert "2 + 2 == 4" in (project.root / "patches/kernels/0002-Test-the-kimi-op.patch").read_text()
    assert project.run("export", "--check").exit_code == 0


def test_status_reports_trailers_and_states(project: Project) -> None:
    before = json.loads(project.run("status", "--json").stdout)["result"]["upstreams"]
    assert [u["upstream"] for u in before] == ["kernels", "app"]
    assert before[0]["mirror_head"] is None and before[0]["patches"][0]["state"] == "not applied"
    assert project.run("apply").exit_code == 0
    report = json.loads(project.run("status", "--json").stdout)["result"]["upstreams"]
    kernels, app = report
    assert kernels["patches"][0]["prs"] == ["vllm-project/vllm-xpu-kernels#592"]
    assert kernels["patches"][0]["upstream_status"] == "submitted"
    assert app["patches"][0]["requires"] == ["kernels/0001-Add-the-kimi-op.patch"]
    assert all(p["state"] == "applied" for u in report for p in u["patches"])
    assert app["behind"] == 14 and app["base_commit"] == project.app_base
    human = project.run("status")
    assert human.exit_code == 0 and "0001-Route-k3-to-the-XPU-path.patch" in human.stdout


def _break_kernels_patch(project: Project) -> None:
    """Upstream rewrites the line the first kernels patch changes, then the stack is pointed at that commit."""
    new_base = commit(project.kernels, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.26)\nproject(kernels)\n"
                                        "set(VLLM_EXT_SRC\n  \"csrc/cache.cpp\"\n  \"csrc/norm.cpp\"\n"
                                        "  \"csrc/torch_bindings.cpp\"\n)\n"}, "rename layernorm", 99)
    toml = project.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(project.kernels_base, new_base))


def test_conflict_stops_and_blocks_the_app_then_continue(project: Project) -> None:
    _break_kernels_patch(project)
    result = project.run("apply")
    assert result.exit_code == ExitCode.CONFLICT
    assert "kernels: patch 0001-Add-the-kimi-op.patch does not apply" in result.stderr
    assert "CMakeLists.txt" in result.stderr and "not applied (they require kernels): app" in result.stderr
    assert not (project.workdir / "app").exists()
    status = json.loads(project.run("status", "--json").stdout)["result"]["upstreams"]
    assert [p["state"] for p in status[0]["patches"]] == ["conflict", "not applied"]
    # A plain apply now refuses; the person resolves and continues.
    refused = project.run("apply")
    assert refused.exit_code == ExitCode.WORKTREE and "--continue" in refused.stderr
    tree = project.workdir / "kernels"
    cmake = (tree / "CMakeLists.txt").read_text()
    assert "<<<<<<<" in cmake
    (tree / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.26)\nproject(kernels)\n"
                                         "set(VLLM_EXT_SRC\n  \"csrc/cache.cpp\"\n  \"csrc/kimi.cpp\"\n"
                                         "  \"csrc/norm.cpp\"\n  \"csrc/torch_bindings.cpp\"\n)\n")
    git(tree, "add", "CMakeLists.txt")
    done = project.run("apply", "--continue", "--json")
    assert done.exit_code == 0, done.output
    stacks = json.loads(done.stdout)["result"]["stacks"]
    assert [(s["upstream"], s["outcome"], s["applied"]) for s in stacks] == [("kernels", "applied", 2),
                                                                           ("app", "applied", 2)]
    assert project.run("apply", "--continue").exit_code == ExitCode.WORKTREE  # nothing left to continue


def test_abort_restores_worktrees_exactly(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    before = project.snapshot()
    _break_kernels_patch(project)
    assert project.run("apply").exit_code == ExitCode.CONFLICT
    aborted = project.run("apply", "--abort")
    assert aborted.exit_code == 0, aborted.output
    after = project.snapshot()
    assert {k: v for k, v in after.items() if k != "kpatch.toml"} == \
        {k: v for k, v in before.items() if k != "kpatch.toml"}
    assert git(project.workdir / "kernels", "status", "--porcelain") == ""
    assert project.run("apply", "--abort").exit_code == ExitCode.WORKTREE


def test_abort_after_first_apply_removes_new_worktrees(project: Project) -> None:
    _break_kernels_patch(project)
    assert project.run("apply").exit_code == ExitCode.CONFLICT
    assert project.run("apply", "--abort").exit_code == 0
    assert not (project.workdir / "kernels").exists()


def test_dirty_worktree_is_never_touched(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    (project.workdir / "app" / "app" / "__init__.py").write_text("# my local edit\n")
    before = project.snapshot()
    result = project.run("apply")
    assert result.exit_code == ExitCode.WORKTREE
    assert "has uncommitted changes (M app/__init__.py)" in result.stderr
    assert project.snapshot() == before


def test_a_conflict_is_recorded_as_stopped_and_its_dependents_as_waiting(project: Project) -> None:
    """The run state says which stack stopped at which patch, and that the app waits for it."""
    _break_kernels_patch(project)
    assert project.run("apply").exit_code == ExitCode.CONFLICT
    state = json.loads((project.root / ".kpatch" / "state.json").read_text())
    stacks = state["operation"]["stacks"]
    assert state["operation"]["kind"] == "apply"
    assert stacks["kernels"]["phase"] == "stopped" and stacks["app"]["phase"] == "waiting"
    assert [p["phase"] for p in stacks["kernels"]["patches"]] == ["conflict", "pending"]


def test_unknown_onto_ref_and_unreachable_url(project: Project, tmp_path: Path) -> None:
    before = project.snapshot()
    bad = project.run("apply", "--onto", "kernels=no-such-branch")
    assert bad.exit_code == ExitCode.UPSTREAM and "'no-such-branch' is not a commit, tag or branch" in bad.stderr
    gone = project.run("apply", "--url", f"kernels={tmp_path / 'nowhere'}", "--cache-dir", str(tmp_path / "c2"))
    assert gone.exit_code == ExitCode.BAD_INPUT  # a URL the person gave is checked where it is used
    assert f"upstream kernels: --url kernels={tmp_path / 'nowhere'} is no git repository kpatch can fetch from: " \
        in gone.stderr
    assert project.snapshot() == before
    assert not (project.workdir / "kernels").exists()


def test_onto_moves_a_stack(project: Project) -> None:
    result = project.run("apply", "--onto", "app=main", "--json")
    assert result.exit_code == 0, result.output
    app = json.loads(result.stdout)["result"]["stacks"][1]
    assert app["base"] == git(project.app, "rev-parse", "main")


def test_url_from_environment(project: Project, tmp_path: Path) -> None:
    mirror = tmp_path / "kernels-copy"
    git(tmp_path, "clone", "-q", "--bare", str(project.kernels), str(mirror))
    toml = project.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(f'url = "{project.kernels}"', 'url = "https://github.com/x/k.git"'))
    import os

    os.environ["KPATCH_URL_KERNELS"] = str(mirror)
    try:
        assert project.run("apply").exit_code == 0
    finally:
        del os.environ["KPATCH_URL_KERNELS"]
    assert (project.workdir / "kernels" / "csrc" / "kimi.cpp").exists()


def test_export_refuses_to_overwrite_patch_files_changed_since_the_worktree_was_made(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    patch = project.root / "patches" / "kernels" / "0001-Add-the-kimi-op.patch"
    # what `kpatch propose` does: a trailer written into the patch file, not into the worktree's commit
    patch.write_bytes(patch.read_bytes().replace(b"Upstream-PR: vllm-project/vllm-xpu-kernels#592\n",
                                                 b"Upstream-PR: vllm-project/vllm-xpu-kernels#592\n"
                                                 b"Upstream-PR: acme/kernels#7\n", 1))  # bytes: CRLF files inside
    before = project.snapshot()
    refused = project.run("export")
    assert refused.exit_code == ExitCode.WORKTREE, refused.output
    assert "changed since its worktree was made" in refused.stderr and "kpatch apply" in refused.stderr
    assert project.snapshot() == before
    again = project.run("apply")
    assert again.exit_code == 0, again.output  # the worktree takes the new trailer ...
    assert project.run("export").exit_code == 0  # ... and export keeps it
    assert "Upstream-PR: acme/kernels#7" in patch.read_text()


def test_export_adds_a_new_commit_and_logs_the_run(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    tree = project.workdir / "kernels"
    commit(tree, {"csrc/extra.cpp": "// one more kernel\n"}, "[XPU] Add one more kernel\n\nUpstream-Status: pending\n",
           6000)
    assert project.run("export", "--check").exit_code == ExitCode.CONFLICT
    assert project.run("export").exit_code == 0
    series = (project.root / "patches" / "kernels" / "series").read_text().splitlines()
    assert series[-1] == "0003-XPU-Add-one-more-kernel.patch" and series[0] == "# applied in this order"
    assert project.run("export", "--check").exit_code == 0
    logs = sorted((Path(project.root).parent / "home" / ".cache" / "kpatch" / "logs").glob("kpatch-*-export.log"))
    assert logs and "format-patch" in logs[-1].read_text()


def test_kill_inside_git_am_then_continue(project: Project, tmp_path: Path) -> None:
    """SIGKILL to kpatch and its git am mid-patch: apply refuses, --continue starts that stack again and ends
    at the same commits a clean apply gives."""
    assert project.run("apply").exit_code == 0
    clean_heads = {name: git(project.workdir / name, "rev-parse", "HEAD") for name in ("kernels", "app")}
    forget_held_files(project.root)  # else apply takes the commits it made: no git am to kill
    cache = Path(project.root).parent / "home" / ".cache" / "kpatch"
    kill_inside_git_am([*KPATCH, "apply"], project.root, mirror_dir(cache, "kernels"),
                       tmp_path / "in-am")
    state = json.loads((project.root / ".kpatch" / "state.json").read_text())
    assert state["operation"]["stacks"]["kernels"]["phase"] == "running"
    refused = project.run("apply")
    assert refused.exit_code == ExitCode.WORKTREE and "--continue" in refused.stderr
    done = project.run("apply", "--continue")
    assert done.exit_code == 0, done.output
    assert {name: git(project.workdir / name, "rev-parse", "HEAD") for name in ("kernels", "app")} == clean_heads


def test_apply_continue_refuses_a_waiting_worktree_edited_meanwhile(project: Project) -> None:
    """apply --continue moves a WAITING stack's worktree with `checkout`; an edit made there while the run was
    stopped must stop it (it was once refused as read-only, once carried along silently)."""
    assert project.run("apply").exit_code == 0
    _break_kernels_patch(project)
    assert project.run("apply").exit_code == ExitCode.CONFLICT
    readme = project.workdir / "app" / "README.md"
    readme.write_text(readme.read_text() + "a person's note\n")  # app waits; its old worktree is still there
    kernels = project.workdir / "kernels"
    git(kernels, "checkout", "--theirs", "CMakeLists.txt")
    git(kernels, "add", "CMakeLists.txt")
    done = project.run("apply", "--continue")
    assert done.exit_code != 0 and "uncommitted changes" in done.stderr, done.output


def test_a_worktree_edited_while_an_earlier_stack_applies_is_refused_before_it_moves(project: Project) -> None:
    """A new apply checks every worktree first, and each later stack's again just before moving it: a person may
    edit the app's worktree while the kernels' git am runs (here: the am's own hook does, at that moment)."""
    assert project.run("apply").exit_code == 0
    forget_held_files(project.root)  # else apply takes the commits it made: no git am to edit the worktree in
    readme = project.workdir / "app" / "README.md"
    mirror = mirror_dir(Path(project.root).parent / "home" / ".cache" / "kpatch", "kernels")
    hook = mirror / "hooks" / "applypatch-msg"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\necho \"a person's note\" >> '{readme}'\n")
    hook.chmod(0o755)
    result = project.run("apply")
    assert result.exit_code == ExitCode.WORKTREE, result.output
    assert "has uncommitted changes (M README.md)" in result.stderr
    assert readme.read_text().endswith("a person's note\n")


def test_a_hand_edited_patch_made_on_another_base_names_its_file_line_cause_and_the_step_that_helps(
        project: Project) -> None:
    """A patch whose index lines name blobs this upstream lacks (hand-edited, or made against another base):
    `am -3` has no ancestor to merge with, changes no file and leaves `git status` clean. The error still names
    the file and line, says why in words, and the step it names (then --continue) gets the stack applied."""
    patch = next((project.root / "patches" / "app").glob("0002-*.patch"))
    text = patch.read_text()
    assert " # metadata line 19\n" in text and "index bf2353f230b1" in text
    patch.write_text(text.replace(" # metadata line 19\n", " # metadata line nineteen\n")
                     .replace("index bf2353f230b1", "index 111111111111"))
    result = project.run("apply")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    assert "  app/models/k3/nvidia/metadata.py:19\n" in result.stderr
    assert ("its index lines name blobs this upstream does not have (app/models/k3/nvidia/metadata.py): it was "
            "made against another base") in result.stderr
    assert "'git am --show-current-patch=diff | git apply --reject'" in result.stderr
    stopped = json.loads(project.run("apply", "--json").stdout)
    assert stopped["error"]["exit_code"] == ExitCode.WORKTREE  # mid-am: the conflict stays to be resolved
    tree = project.workdir / "app"
    assert git(tree, "status", "--porcelain") == ""  # nothing to fix in the tree: hence the cause in words
    diff = git(tree, "am", "--show-current-patch=diff") + "\n"  # the step, as the message spells it
    step = subprocess.run(["git", "apply", "--reject"], input=diff, cwd=tree, capture_output=True, text=True,
                          check=False)
    assert step.returncode == 1 and "Rejected hunk #1." in step.stderr
    target = tree / "app/models/k3/nvidia/metadata.py"
    target.write_text(target.read_text().replace("    assert t.is_cuda\n", "    assert t.device.type != 'cpu'\n"))
    (tree / "app/models/k3/nvidia/metadata.py.rej").unlink()
    git(tree, "add", "-A")
    done = project.run("apply", "--continue")
    assert done.exit_code == 0, done.output
    assert git(tree, "log", "--format=%s", "-1") == "[XPU] Make the block-table assert device-generic"


def _numbers(folder: Path) -> list[str]:
    return [name[:4] for name in (folder / "series").read_text().splitlines() if name.endswith(".patch")]


def test_export_numbers_never_collide_and_a_reorder_renumbers_by_renaming_alone(project: Project) -> None:
    """A commit put between two exported ones got the number of the one after it (two 0002 files); after a
    reorder the series read 0001, 0003, 0002. Now the folder's order is the apply order: the files are renamed,
    their bytes as they were."""
    assert project.run("apply").exit_code == 0
    tree, folder = project.workdir / "app", project.root / "patches" / "app"
    first, second = git(tree, "rev-list", "--reverse", f"{project.app_base}..HEAD").split()
    old_second = next(folder.glob("0002-*.patch"))
    before = old_second.read_bytes()
    git(tree, "reset", "--quiet", "--hard", first)
    commit(tree, {"docs/xpu.md": "The XPU path.\n"}, "[XPU] Document the XPU path\n\nUpstream-Status: pending\n",
           7000)
    git(tree, "cherry-pick", "--quiet", "--allow-empty", second)
    assert project.run("export", "app").exit_code == 0
    series = [n for n in (folder / "series").read_text().splitlines() if n.endswith(".patch")]
    assert series == ["0001-Route-k3-to-the-XPU-path.patch", "0002-XPU-Document-the-XPU-path.patch",
                      "0003-XPU-Make-the-block-table-assert-device-generic.patch"]
    assert sorted(p.name for p in folder.glob("*.patch")) == series  # no 0002 beside another 0002
    assert (folder / series[2]).read_bytes() == before and not old_second.exists()  # a rename: same bytes
    documented = (folder / series[1]).read_bytes()
    git(tree, "reset", "--quiet", "--hard", first)  # the reorder: the old second patch first again
    for name in (series[2], series[1]):
        git(tree, "am", "--quiet", "--keep-non-patch", str(folder / name))
    assert project.run("export", "app").exit_code == 0
    assert _numbers(folder) == ["0001", "0002", "0003"]
    renamed = [n for n in (folder / "series").read_text().splitlines() if n.endswith(".patch")]
    assert renamed == ["0001-Route-k3-to-the-XPU-path.patch",
                       "0002-XPU-Make-the-block-table-assert-device-generic.patch",
                       "0003-XPU-Document-the-XPU-path.patch"]
    assert (folder / renamed[1]).read_bytes() == before and (folder / renamed[2]).read_bytes() == documented
    assert sorted(p.name for p in folder.glob("*.patch")) == renamed
    assert project.run("export", "--check").exit_code == 0 and project.run("apply").exit_code == 0
