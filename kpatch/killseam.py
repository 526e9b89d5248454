"""Test seam: `KPATCH_TEST_KILL_AT=<point>` SIGKILLs kpatch when it reaches that named point, so that a test
kills it exactly there (no timing). The points:

- `journal:N`: after N steps of a journaled write (0: once staged, before the commit point); `journal:close`:
  the command is finished, just before the journal is dropped; `journal:staging`: a new journal is staged under
  its own name, before it becomes the journal; `journal:dropped`: the journal was renamed away, before it is
  removed (kpatch/project/journal.py);
- `mirror:init`: a new mirror's `git init --bare` has run, before the mirror is moved into place;
- `worktree:add`: `git worktree add` has written the new worktree's HEAD and its `locked` file ("initializing")
  but not checked anything out yet: what a kill in the middle of it leaves (kpatch/gitx/mirror.py);
- `worktree:move`: a worktree's record names its new folder, before the folder is renamed (kpatch/gitx/mirror.py);
- `rebase:beside:<upstream>`: a rebase with no worktree of that stack's to move has started checking one out at
  the new base beside its `git am` (kpatch/engine/worktrees.py);
- `rebase:scratch:<upstream>`: a rebase has made that stack's scratch worktree, before it copies the recorded
  resolutions into the mirror's rr-cache (kpatch/engine/rebase.py);
- `rebase:finished`: a rebase has recorded its end (run state and files new), before its scratch worktrees
  are removed (kpatch/engine/rebase.py);
- `scratch:<kind>`: a temp folder of that kind (`mail`, `export`, `picks`, `trial`, `replay`, `diff`, `check`,
  `preimages`, `objects`, `index`, `commits`, `doctor`, `build`, `image`, `test`, `probe`, `verify`, `pairs`,
  `pages`) is full and about to be removed; `scratch:stack`: a range-diff's throwaway worktree has
  run its `git am` (kpatch/scratch.py, kpatch/gitx/rangediff.py).
"""

from __future__ import annotations

import os
import signal

KILL_AT = "KPATCH_TEST_KILL_AT"


def armed(point: str) -> bool:
    """True when the test seam asks for a kill at `point`."""
    return os.environ.get(KILL_AT) == point


def reached(point: str) -> None:
    """SIGKILL this kpatch when the test seam asks for a kill at `point`."""
    if armed(point):
        os.kill(os.getpid(), signal.SIGKILL)
