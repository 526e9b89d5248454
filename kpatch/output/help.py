"""One real example per command, shown at the end of its --help (a test parses each one with the command itself)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    command: str  # exactly what to type
    does: str  # what it does, in a few words


EXAMPLES = {
    "apply": Example("kpatch apply --url vllm-xpu-kernels=/src/vllm-xpu-kernels --url vllm=/src/vllm",
                     "apply both stacks, fetching the upstreams from local clones instead of GitHub"),
    "status": Example("kpatch status --json", "pins, mirror heads and every patch's state, for a script"),
    "diff": Example("kpatch diff origin/main --stat",
                    "what a nightly's branch does to each patch against main: one line per patch"),
    "export": Example("kpatch export vllm --check", "exit 1 if a worktree commit is not in patches/vllm yet"),
    "rebase": Example("kpatch rebase --onto vllm=v0.33.0", "move vLLM's stack to the v0.33.0 tag (kernels to main)"),
    "backport": Example("kpatch backport vllm/0005-XPU-fix-the-kv-cache-guard.patch --to 0.33",
                        "carry a main patch onto the 0.33 release line's vLLM stack (3-way, one journaled step)"),
    "build-wheels": Example("kpatch build-wheels --base-image kpatch-test-base:bookworm --out dist",
                            "build the pair on a local base image; wheels and pylock.toml into dist/"),
    "verify": Example("kpatch verify --installed", "check dist/pylock.toml, the op contract and this environment"),
    "test": Example("kpatch test --upstream vllm-xpu-kernels --timeout 600",
                    "run the kernels' suite on the locked pair; stop it after 10 minutes"),
    "demo": Example("kpatch demo --keep", "the whole pipeline on example upstreams; keep the folder to look around"),
    "doctor": Example("kpatch doctor --fsck", "check git, Docker, the image, GPU, mirrors (fsck), token and disk"),
    "init": Example("kpatch init --upstream vllm=https://github.com/vllm-project/vllm.git@v0.33.0 --ci",
                    "start a project on vLLM's v0.33.0 tag, with the nightly workflow"),
    "import": Example("kpatch import vllm --from https://github.com/acme/vllm.git@xpu-fixes",
                      "make vLLM's stack from the commits of a fork's branch since the base"),
    "nightly": Example("kpatch nightly --dry-run", "rebase, build, verify and test; say what it would report"),
    "propose": Example("kpatch propose vllm/0001-XPU-route-k3.patch --fork acme --dry-run",
                       "print the branch and pull request kpatch would send for a vLLM patch (kernels first)"),
    "release": Example("kpatch release --to site --base-url https://example.org/kimi-xpu",
                       "publish the verified set in dist/ into site/stable/simple, and print the install command"),
    "report": Example("kpatch report --html site", "the carry dashboard from the nightly's history: site/index.html"),
}


def epilog(name: str) -> str | None:
    """The example as click prints it: `\\b` keeps click from re-wrapping the lines."""
    example = EXAMPLES.get(name)
    if example is None:
        return None
    return f"\b\nExample: {example.does}\n  $ {example.command}"
