"""Write the search's round jobs into ci/nightly-line.yml (and its two copies), the workflow of one release line's
night (ci/nightly.yml calls it per line): GitHub Actions has no loop over jobs, so
the rounds are unrolled, ROUNDS of them, each a matrix of step jobs (`kpatch nightly --run-step`) and a collecting
job (`kpatch nightly --collect`; the last one `--final`: the search stops there, saying how far it got).

  python scripts/nightly_rounds.py          # rewrite the block between the markers
  python scripts/nightly_rounds.py --check  # exit 1 when a workflow's block is not what this gives

Why a bound of 4: with [nightly] runners = N a round tries N commits, so 4 rounds settle (N+1)^4 commits: 256 with
3 runners, 4,096 with 7 (a busy upstream day is 40-80); a bisection (N = 1) settles only 16 in 4 rounds, so it is
the local search's (`--runners 1`), not the matrix's. docs/nightly.md says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROUNDS = 4
ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = (ROOT / "ci" / "nightly-line.yml", ROOT / ".github" / "workflows" / "nightly-line.yml",
             ROOT / "kpatch" / "adopt" / "data" / "nightly-line.yml")
BEGIN = "  # --- the search's rounds: scripts/nightly_rounds.py writes them (ROUNDS = {rounds}); do not edit ---\n"
END = "  # --- the end of the search's rounds ---\n"

CHECKOUT = """\
      - name: Check out the stacks
        uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1  # v7.0.1
        with:
          persist-credentials: false
          fetch-depth: 0

      - name: Set up Python
        uses: actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97  # v7.0.0
        with:
          python-version: "3.11"

      - name: Restore the upstream mirrors
        uses: actions/cache/restore@27d5ce7f107fe9357f9df03efb73ab90386fccae  # v5.0.5
        with:
          path: .kpatch-cache/mirrors
          key: kpatch-mirrors-${{{{ hashFiles('kpatch.toml') }}}}
          restore-keys: |
            kpatch-mirrors-
{wheels}
      - name: Install kpatch (its dependencies from a lock with hashes)
        run: |
          python -m pip install --quiet --require-hashes --no-deps -r ci/nightly-requirements.txt
          python -m pip install --quiet --no-deps --no-build-isolation .

      - name: Download round {round}'s plan
        uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c  # v8.0.1
        with:
          name: kpatch-scroll-plan-${{{{ github.run_id }}}}-${{{{ inputs.line }}}}-{round}
          path: ${{{{ env.REPORTS }}}}
"""

WHEELS = """
      - name: Restore the wheel cache
        uses: actions/cache/restore@27d5ce7f107fe9357f9df03efb73ab90386fccae  # v5.0.5
        with:
          path: .kpatch-cache/wheels
          key: ${{ env.CACHE_KEY }}wheels-${{ hashFiles('kpatch.toml', 'pylock.toml', 'patches/**') }}
          restore-keys: |
            ${{ env.CACHE_KEY }}wheels-
"""

STEP = """\
  step-{round}:
    # One job per commit round {round} tries: the night's chain at that commit, in scratch. No secret, a token
    # that may only read; its result and logs go to the collecting job as an artifact (data, checked on read).
    name: search round {round}, step ${{{{ matrix.step }}}} (Intel GPU)
    needs: {planner}
    if: ${{{{ !cancelled() && needs.{planner}.outputs.searching == 'true' }}}}
    runs-on: [self-hosted, linux, x64, intel-gpu]
    timeout-minutes: 360
    permissions:
      contents: read  # check out the stacks
    strategy:
      fail-fast: false  # a red step is an answer, not a reason to cancel the others
      matrix: ${{{{ fromJSON(needs.{planner}.outputs.matrix) }}}}
    env:
      KPATCH_CACHE_DIR: ${{{{ github.workspace }}}}/.kpatch-cache
    steps:
{checkout}

      - name: kpatch nightly --run-step
        env:
          STEP: ${{{{ matrix.step }}}}
          OUT: ${{{{ runner.temp }}}}/step
        run: |
          kpatch nightly --line "${{LINE}}" --run-step "${{REPORTS}}/scroll/plan.json" "${{STEP}}" \\
            --step-out "${{OUT}}"

      - name: Upload the step's result and logs
        if: always()
        uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f  # v7.0.0
        with:
          name: kpatch-scroll-step-${{{{ github.run_id }}}}-${{{{ inputs.line }}}}-{round}@${{{{ matrix.step }}}}
          path: ${{{{ runner.temp }}}}/step/
          if-no-files-found: ignore  # a step that wrote nothing is named missing by the collecting job
          retention-days: 5

"""

COLLECT = """\
  collect-{round}:
    # Takes round {round}'s step results and plans round {next}{last}; when the search is over, finishes the night's
    # report and the stacks (rebased onto the last green commits, their lock kept) for the publish job.
    name: search round {round}, collect
    needs: [{planner}, step-{round}]
    if: ${{{{ !cancelled() && needs.{planner}.outputs.searching == 'true' }}}}
    runs-on: [self-hosted, linux, x64, intel-gpu]
    timeout-minutes: 60
    permissions:
      contents: read  # check out the stacks
    outputs:
      searching: ${{{{ steps.next.outputs.searching }}}}
      matrix: ${{{{ steps.next.outputs.matrix }}}}
      stacks: ${{{{ steps.next.outputs.stacks }}}}
    env:
      KPATCH_CACHE_DIR: ${{{{ github.workspace }}}}/.kpatch-cache
    steps:
{checkout}

      - name: Download round {round}'s step results
        uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c  # v8.0.1
        with:
          pattern: kpatch-scroll-step-${{{{ github.run_id }}}}-${{{{ inputs.line }}}}-{round}@*
          path: ${{{{ env.REPORTS }}}}/scroll/steps

      - name: kpatch nightly --collect
        run: kpatch nightly --line "${{LINE}}" --collect "${{REPORTS}}/scroll" --report "${{REPORTS}}"{final}

      - name: Note the next round, or the night's end
        id: next
        run: |
          if [ -f "${{REPORTS}}/scroll/matrix.json" ]; then
            {{ echo "searching=true"; echo "matrix=$(cat "${{REPORTS}}/scroll/matrix.json")"; }} >> "$GITHUB_OUTPUT"
          else
            echo "stacks=true" >> "$GITHUB_OUTPUT"
          fi
{upload_plan}
      - name: Upload the report and the refreshed stacks for the publish job
        if: steps.next.outputs.stacks == 'true'
        uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f  # v7.0.0
        with:
          name: kpatch-nightly-stacks-${{{{ github.run_id }}}}-${{{{ inputs.line }}}}
          path: |
            ${{{{ env.REPORTS }}}}/report.json
            ${{{{ env.REPORTS }}}}/history.jsonl
            kpatch.toml
            pylock.toml
            patches/
          include-hidden-files: true  # patches/.rerere (a line's: patches/LINE/.rerere) go to the branch too
          if-no-files-found: error
          retention-days: 5

"""

UPLOAD_PLAN = """
      - name: Upload round {next}'s plan
        if: steps.next.outputs.searching == 'true'
        uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f  # v7.0.0
        with:
          name: kpatch-scroll-plan-${{{{ github.run_id }}}}-${{{{ inputs.line }}}}-{next}
          path: |
            ${{{{ env.REPORTS }}}}/report.json
            ${{{{ env.REPORTS }}}}/history.jsonl
            ${{{{ env.REPORTS }}}}/scroll/
            !${{{{ env.REPORTS }}}}/scroll/steps/
          include-hidden-files: true  # the saved patches/.rerere
          if-no-files-found: error
          retention-days: 5
"""


def block(rounds: int = ROUNDS) -> str:
    """The round jobs, step-1, collect-1, ..., step-N, collect-N."""
    parts = [BEGIN.format(rounds=rounds)]
    for n in range(1, rounds + 1):
        planner = "nightly" if n == 1 else f"collect-{n - 1}"
        parts.append(STEP.format(round=n, planner=planner,
                                 checkout=CHECKOUT.format(round=n, wheels=WHEELS).rstrip("\n")))
        last = n == rounds
        parts.append(COLLECT.format(
            round=n, next=n + 1, planner=planner, final=" --final" if last else "",
            last=" (the last round: --final, the search stops here)" if last else "",
            checkout=CHECKOUT.format(round=n, wheels="").rstrip("\n"),
            upload_plan="" if last else UPLOAD_PLAN.format(next=n + 1)))
    return "".join(parts) + END


def rewritten(text: str) -> str:
    head, marker, rest = text.partition(BEGIN.format(rounds=ROUNDS))
    if not marker:
        head, marker, rest = text.partition("  # --- the search's rounds")
        rest = rest.split("\n", 1)[1] if marker else ""
    if not marker or END not in rest:
        raise SystemExit("the workflow has no round block (its markers)")
    return head + block() + rest.split(END, 1)[1]


def main(argv: list[str]) -> int:
    stale = []
    for path in WORKFLOWS:
        text = path.read_text(encoding="utf-8")
        new = rewritten(text)
        if new != text:
            stale.append(path)
            if "--check" not in argv:
                path.write_text(new, encoding="utf-8")
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)}: its round jobs are stale: run python scripts/nightly_rounds.py",
                  file=sys.stderr)
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
