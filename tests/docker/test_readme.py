"""The documents' runnable blocks (```sh runnable: README.md, then docs/*.md; today docs/workflow.md holds them) run,
in order and in one shell, on the example project, on the real engine; what each block's shown output starts its
lines with is still what kpatch prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from readme import RUNNABLE, Block, blocks, documents


def test_the_documented_daily_workflow_runs_as_written(tmp_path: Path, base_image: str) -> None:
    found: list[tuple[str, list[Block]]] = [(name, blocks(text)) for name, text in documents()]
    folder = tmp_path / "example"
    script = "\n".join(f"echo '>>> {name}:{b.line}'\n" + b.text.replace("/tmp/example", str(folder))
                       for name, those in found for b in those if b.info == RUNNABLE)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "KPATCH_BASE_IMAGE": base_image}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    # Each output block shown right after a runnable block: every line it shows starts as a printed line does.
    printed = {line.split()[0] for line in (done.stdout + done.stderr).splitlines() if line.split()}
    shown = set()
    for _, those in found:
        for block, after in zip(those, those[1:], strict=False):
            if block.info == RUNNABLE and after.info == "text":
                shown |= {line.split()[0] for line in after.text.splitlines() if line.split()}
    assert len(shown) > 10 and shown <= printed, sorted(shown - printed)
    assert (folder / "project" / "patches" / "app" / "0003-XPU-Say-that-the-XPU-path-reuses-the-model.patch").is_file()
    assert (folder / "project" / "reports" / "app.xml").is_file()
