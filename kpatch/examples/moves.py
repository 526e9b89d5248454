"""What the example upstreams do after the stacks were applied: the history `kpatch demo`'s rebase meets.

The kernels upstream merges the stack's first patch (as PR #592, the very same change), so the rebase drops it as
`upstream`; the app upstream rewrites the line the app stack's second patch changes, so that patch conflicts, and
a recorded resolution shipped with the example project (`patches/.rerere/app/<id>/`, what a person's earlier
`kpatch rebase --continue` would have left) resolves it without a person.

None of this is in the example upstreams `make_example_project` builds: the tests that use them see only the
history up to `main` as it was; the demo adds these commits itself, after its `apply`.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from kpatch.examples.upstreams import APP_FILES, KERNEL_CHANGES, ExampleProject, commit
from kpatch.gitx import out, run
from kpatch.gitx.am import AM_OPTIONS

MAINTAINER = ("Kernel Maintainer", "maintainer@example.invalid")
APP_MAINTAINER = ("App Maintainer", "app-maintainer@example.invalid")
METADATA = "app/models/k3/nvidia/metadata.py"
_OLD_ASSERT = "    assert t.is_cuda\n"
# The upstream's new line, and the resolution a person recorded: the patch's device-generic test, upstream's message.
UPSTREAM_METADATA = APP_FILES[METADATA].replace(_OLD_ASSERT, '    assert t.is_cuda, "block tables live on the GPU"\n')
RESOLVED_METADATA = APP_FILES[METADATA].replace(
    _OLD_ASSERT, "    assert t.device.type != 'cpu', \"block tables live on the GPU\"\n")
KERNELS_MERGE_MESSAGE = ("Add the kimi op (#592)\n\nThe XPU kernel for the fused epilogue.\n\n"
                         "Co-authored-by: kpatch developers <dev@kpatch.invalid>\n")
APP_MESSAGE = "k3: say why the block table must be on the GPU\n"


@dataclass(frozen=True)
class UpstreamMove:
    """One commit an example upstream gained after the apply."""

    upstream: str
    commit: str
    subject: str
    effect: str  # what it does to the stack, in a few words


def move_upstreams(example: ExampleProject) -> tuple[UpstreamMove, ...]:
    """Commit the merged patch on the kernels' main and the conflicting rewrite on the app's main."""
    merged = commit(example.kernels, KERNEL_CHANGES[0][0], KERNELS_MERGE_MESSAGE, 2000, MAINTAINER)
    rewritten = commit(example.app, {METADATA: UPSTREAM_METADATA}, APP_MESSAGE, 2001, APP_MAINTAINER)
    return (UpstreamMove("kernels", merged, KERNELS_MERGE_MESSAGE.splitlines()[0],
                         f"merges the stack's {_patch_name(example, 'kernels', 0)}"),
            UpstreamMove("app", rewritten, APP_MESSAGE.strip(),
                         f"rewrites the line {_patch_name(example, 'app', 1)} changes"))


def ship_resolution(example: ExampleProject) -> Path:
    """Record, with git rerere on a scratch copy of the moved app upstream, the resolution of the coming conflict.

    The recording lands in `patches/.rerere/app/<id>/{preimage,postimage}`, where kpatch keeps the resolutions a
    person made; the id is git's hash of the conflict, so the rebase onto the moved upstream finds it.
    """
    scratch = example.root.parent / ".scratch-rerere"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(example.app, scratch, symlinks=True)
    try:
        commit(scratch, {METADATA: UPSTREAM_METADATA}, APP_MESSAGE, 2001, APP_MAINTAINER)
        run(["config", "rerere.enabled", "true"], scratch)
        patches = [example.root / "patches" / "app" / name for name in _series(example, "app")]
        stopped = run(["am", *AM_OPTIONS, "--", *map(str, patches)], scratch, check=False)
        if stopped.status == 0 or out(["diff", "--name-only", "--diff-filter=U"], scratch) != METADATA:
            raise RuntimeError(f"the example's app stack did not conflict on {METADATA} as expected")
        (scratch / METADATA).write_text(RESOLVED_METADATA, encoding="utf-8")
        run(["rerere"], scratch)
        recorded = [p for p in (scratch / ".git" / "rr-cache").iterdir() if (p / "postimage").is_file()]
        if len(recorded) != 1:
            raise RuntimeError(f"git rerere recorded {len(recorded)} resolutions, expected one")
        kept = example.root / "patches" / ".rerere" / "app" / recorded[0].name
        kept.mkdir(parents=True)
        for part in ("preimage", "postimage"):
            shutil.copyfile(recorded[0] / part, kept / part)
        return kept
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _series(example: ExampleProject, name: str) -> list[str]:
    lines = (example.root / "patches" / name / "series").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _patch_name(example: ExampleProject, name: str, index: int) -> str:
    return f"{name}/{_series(example, name)[index]}"

