"""The night's "What changed in the patches" section: unchanged patches in one line, each changed one collapsed with
its interdiff, the dropped with the upstream commit; within GitHub's body limit on a 300-patch stack, the whole
range-diff then in range-diff.txt. No git."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from kpatch.dashboard.night import Outcome, Report, Stage, StageRun, StageStatus, report_from_json
from kpatch.engine.diff import Change, PatchChange, StackDiff
from kpatch.engine.reports import PatchReport
from kpatch.nightly import render
from kpatch.nightly.publish import run_url
from kpatch.project.state import PatchClass

BODY_LIMIT = 65_536  # GitHub's, for an issue or pull request body


def _interdiff(n: int, lines: int) -> str:
    head = f"{n}:  {n:07x} ! {n}:  {n + 1:07x} Fix {n}\n"
    return head + "".join(f"    @@ src/f{n}.c: fn\n    --old line {i} of {n}\n    ++new line {i} of {n}\n"
                          for i in range(lines))


def _review(patches: int, changed: set[int], dropped: set[int], lines: int = 3) -> StackDiff:
    out = []
    for n in range(1, patches + 1):
        name = f"{n:04d}-Fix-{n}.patch"
        if n in dropped:
            out.append(PatchChange(name, Change.DROPPED, "a" * 40, None, f"{n}:  {n:07x} < -:  ------- Fix {n}\n"))
        elif n in changed:
            out.append(PatchChange(name, Change.CHANGED, "a" * 40, "b" * 40, _interdiff(n, lines)))
        else:
            out.append(PatchChange(name, Change.UNCHANGED, "a" * 40, "b" * 40, f"{n}:  {n:07x} = {n}:  0 Fix {n}\n"))
    return StackDiff(upstream="kernels", old_base="1" * 40, new_base="2" * 40, patches=tuple(out),
                     range_diff="".join(p.interdiff for p in out), old_range="3" * 40 + ".." + "4" * 40,
                     new_range="2" * 40 + ".." + "5" * 40)


def _night(review: StackDiff) -> Report:
    dropped = [PatchReport("kernels", p.name, PatchClass.UPSTREAM, True, 'same patch-id as upstream "Merge it (#11)"',
                           "d" * 40, (), None) for p in review.patches if p.change is Change.DROPPED]
    return Report(kpatch_version="9.9", started="2026-12-04T02:00:00Z", outcome=Outcome.PASSED, exit_code=0,
                  summary="passed", stages=(StageRun(Stage.REBASE, StageStatus.PASSED, 1.0, 0, "ok"),),
                  patches=tuple(dropped), reviews=(review,))


def test_the_section_lists_unchanged_in_one_line_changed_collapsed_dropped_with_their_commit() -> None:
    text = render.markdown(_night(_review(5, changed={3}, dropped={1})))
    section = text[text.index("## What changed in the patches"):]
    assert "**kernels**: 3 unchanged, 1 changed, 1 dropped, 0 new." in section
    one_line = next(line for line in section.splitlines() if line.startswith("Unchanged"))
    assert all(f"`000{n}-Fix-{n}.patch`" in one_line for n in (2, 4, 5))
    assert "<details><summary>changed <code>kernels/0003-Fix-3.patch</code></summary>" in section
    assert "```diff\n3:  0000003 ! 3:  0000004 Fix 3\n    @@ src/f3.c: fn\n    --old line 0 of 3\n" in section
    assert (f"- dropped `kernels/0001-Fix-1.patch`: merged upstream as `{'d' * 12}` (same patch-id as upstream "
            "\"Merge it (#\u200b11)\")") in section


def test_a_300_patch_night_fits_githubs_body_and_leaves_the_rest_to_the_range_diff_file(tmp_path: Path) -> None:
    review = _review(300, changed=set(range(1, 301, 2)), dropped={2, 4}, lines=12)
    night = _night(review)
    assert len(render.markdown(night)) > BODY_LIMIT  # every interdiff would not fit
    url = run_url({"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/stack",
                   "GITHUB_RUN_ID": "123"})
    body = render.for_github(night, url)
    assert len(body) <= BODY_LIMIT
    assert "cut:" not in body  # nothing else was cut: the other sections are whole
    shown = re.findall(r"<summary>changed <code>kernels/(\S+)</code>", body)
    assert 10 < len(shown) < 150 and body.count("</details>") == len(shown)  # whole blocks only
    assert body.count("```diff") == body.count("\n```\n")  # every fence closed
    note = next(line for line in body.splitlines() if line.startswith("The body is at GitHub's limit"))
    assert "`range-diff.txt`" in note and "(https://github.com/acme/stack/actions/runs/123)" in note
    assert all(f"`kernels/{p.name}`" in note for p in review.patches
               if p.change is Change.CHANGED and p.name not in shown)
    render.write(tmp_path, night)
    whole = (tmp_path / "range-diff.txt").read_text()
    assert whole.startswith(f"# kernels: git range-diff --no-color {review.old_range} {review.new_range}\n")
    assert whole.endswith(review.range_diff) and len(whole) > BODY_LIMIT


def test_the_review_goes_through_report_json_to_the_publish_job() -> None:
    import json

    night = _night(_review(4, changed={2}, dropped={3}))
    assert report_from_json(json.loads(render.to_json(night))) == night
    assert render.for_github(replace(night, reviews=())).count("What changed in the patches") == 0


def test_the_upstream_commits_behind_a_patch_are_named_with_their_pull_request_linked() -> None:
    from kpatch.engine.diff import UpstreamCommit

    behind = (UpstreamCommit("e" * 40, "Rework the cache @owner (#1234)", "Up Stream <up@example.invalid>",
                             "2026-12-03T10:00:00+00:00", 1234, "https://github.com/vllm-project/vllm/pull/1234"),)
    review = _review(4, changed={2}, dropped=set())
    patches = tuple(replace(p, upstream_commits=behind) if p.name in ("0002-Fix-2.patch", "0003-Fix-3.patch") else p
                    for p in review.patches)
    text = render.markdown(_night(replace(review, patches=patches)))
    said = (f"upstream commits that touched its lines: `{'e' * 12}` \"Rework the cache @\u200bowner (#\u200b1234)\" by "
            "Up Stream &lt;up@example.invalid&gt; (2026-12-03T10:00:00+00:00), "
            "[PR 1234](https://github.com/vllm-project/vllm/pull/1234)")
    block = text[text.index("<summary>changed <code>kernels/0002-Fix-2.patch"):]
    assert said in block[:block.index("</details>")]  # inside the changed patch's block
    assert f"- three-way `kernels/0003-Fix-3.patch`: {said}" in text  # unchanged, but its context moved upstream
