#!/usr/bin/env python3
"""Figures: how many hostile inputs (issue 8) kpatch refuses or survives, from the tests that try each one.

Every case of tests/git/test_security.py (URLs that would run commands, credentials, file modes, symlinked
resolutions, unexported work, export from a moved worktree, paths in the run state and the journal),
tests/git/test_security_three.py (issue 37: where the GitHub token and cloud credentials go, a refused `init`,
a copied project, an amended message or author, import and propose input), tests/git/test_security_three_weak.py
(issue 37's weak items: terminal escapes in upstream text, temp folders after kills, bounded history reads, journal
copies that are links, a cache folder that cannot be made, a full disk, $KPATCH_TESTS, a blobless replay),
tests/git/test_security_three_scratch.py (temp folders of diff, apply checks, preimages and a blobless probe after
real kills), tests/git/test_security_three_bounds.py (a FIFO, /dev/zero or a runaway file as kpatch.toml, a series
or a patch file, each refused before it is read), the closed-pipe test of tests/git/test_output.py
(`kpatch status | head -1`) and tests/git/test_roundtrip.py (messages git am reads differently, CRLF files,
header-like diff lines) is one vector: kpatch runs as its own process and the test checks that nothing ran,
leaked, changed or was lost.
`--tree` runs another kpatch source tree under the same tests (e.g. an old commit: `git archive 5240a9e |
tar -x -C /tmp/old`), to show what it let through.

    python3 scripts/hostile_vectors.py [--tree DIR] [--with-real-world] [--basetemp DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ("tests/git/test_security.py", "tests/git/test_security_three.py", "tests/git/test_security_three_weak.py",
           "tests/git/test_security_three_scratch.py", "tests/git/test_security_three_bounds.py",
           "tests/git/test_roundtrip.py",
           "tests/git/test_output.py::test_a_closed_pipe_ends_every_command_quietly_with_141_as_git_does")
REAL_WORLD = "tests/git/test_real_world.py"
# These drive kpatch's modules in pytest's own process, so they always test this checkout: left out with --tree.
IN_PROCESS = ("tests/git/test_security.py::test_the_fetch_layer_refuses_ext_and_options_whatever_the_user_config",
              "tests/git/test_security.py::test_the_test_log_replaces_a_planted_link_and_never_writes_through_it",
              "tests/git/test_security.py::test_the_dispatcher_probe_imports_nothing_from_the_working_folder",
              "tests/git/test_roundtrip.py::test_apply_of_export_gives_the_same_commit_or_a_clear_refusal",
              "tests/git/test_security_three.py::test_push_env_carries_the_token_only_to_github_or_the_configured_"
              "enterprise_host_and_never_in_a_dry_run",
              "tests/git/test_security_three.py::test_a_build_gets_the_cloud_credentials_only_of_the_remote_compiler_"
              "cache_it_is_configured_with",
              "tests/git/test_security_three.py::test_the_dispatcher_probe_child_sees_no_credential",
              "tests/git/test_security_three.py::test_init_tells_a_url_holding_a_secret_from_an_ssh_user_name",
              "tests/git/test_security_three_weak.py::test_kpatch_tests_keeps_a_non_ascii_name_and_a_path_with_a_"
              "space_as_one_file_each")


def run(files: list[str], tree: Path | None, basetemp: Path) -> dict[str, dict[str, list[str]]]:
    """{file: {test function: [outcome per case]}} from one pytest run (outcomes: held, failed, error)."""
    env = dict(os.environ)
    deselect: list[str] = []
    if tree is not None:
        env["KPATCH_UNDER_TEST"] = str(tree.resolve())
        deselect = [f"--deselect={node}" for node in IN_PROCESS]
    with tempfile.TemporaryDirectory(prefix="kpatch-vectors-") as folder:
        report = Path(folder) / "junit.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}",
                        f"--junitxml={report}", *deselect, *files], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        if not report.exists():
            raise SystemExit("error: pytest wrote no report (are the test extras installed?)")
        results: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 - the report pytest just wrote
            module = case.get("classname", "").rsplit(".", 1)[-1] + ".py"
            function = case.get("name", "").split("[", 1)[0]
            outcome = "failed" if case.find("failure") is not None else \
                "error" if case.find("error") is not None else "skipped" if case.find("skipped") is not None \
                else "held"
            results[module][function].append(outcome)
    return results


def show(results: dict[str, dict[str, list[str]]], title: str) -> tuple[int, int]:
    held = total = 0
    lines = []
    for module, functions in sorted(results.items()):
        for function, outcomes in functions.items():
            ok = outcomes.count("held")
            held, total = held + ok, total + len(outcomes)
            lines.append(f"  {ok:>3}/{len(outcomes):<3} {module}::{function}")
    print(f"{title}: {held}/{total}")
    print("\n".join(lines))
    return held, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, help="kpatch source tree to run (default: this checkout)")
    parser.add_argument("--with-real-world", action="store_true", help=f"also count {REAL_WORLD}")
    parser.add_argument("--basetemp", type=Path, default=Path(tempfile.gettempdir()) / "kpatch-vectors-pt")
    args = parser.parse_args()
    where = args.tree.resolve() if args.tree else ROOT
    held, total = show(run(list(VECTORS), args.tree, args.basetemp), f"hostile inputs refused or survived by {where}")
    if args.with_real_world:
        more, count = show(run([REAL_WORLD], args.tree, args.basetemp), "real-world checks passed")
        held, total = held + more, total + count
    return 0 if held == total else 1


if __name__ == "__main__":
    sys.exit(main())
