"""`kpatch propose NAME...`: the named patches as GitHub pull requests on their upstreams, from branches on a fork."""

from __future__ import annotations

import os

import click

from kpatch.commands._common import Context, complete_patches, kpatch_command
from kpatch.errors import UsageError
from kpatch.output.ui import escape


@kpatch_command("propose")
@click.argument("names", nargs=-1, metavar="UPSTREAM/FILE.patch...", shell_complete=complete_patches)
@click.option("--fork", "fork_owner", metavar="OWNER",
              help="Your GitHub account: branches go to its fork of each upstream (the upstream's URL with OWNER, "
                   "unless [upstream.propose] fork names the URL).")
@click.option("--draft", is_flag=True, help="Open the pull requests as drafts.")
@click.option("--dry-run", is_flag=True, help="Print the branches and pull request texts; push, open and write "
              "nothing.")
@click.option("--no-deps", is_flag=True, help="Refuse (do not propose first) a required patch without an Upstream-PR.")
@click.option("--continue", "continue_", is_flag=True, help="Finish the trailer write of an interrupted propose.")
@click.option("--abort", is_flag=True, help="Undo the trailer write of an interrupted propose.")
def command(ctx: Context, names: tuple[str, ...], fork_owner: str | None, draft: bool, dry_run: bool, no_deps: bool,
            continue_: bool, abort: bool) -> int:
    """Send patches upstream as pull requests (one per upstream), required ones first; mark them submitted."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.adopt import propose as engine

    if continue_ or abort:
        if (continue_ and abort) or names:
            raise UsageError("--continue and --abort go alone")
        ws = ctx.workspace()
        finished = False
        if abort:
            engine.abort_propose(ws, ctx.ui)
            ctx.ui.note("propose aborted: patches/ as it was (the pull requests stay open)")
        else:
            finished = engine.continue_propose(ws, ctx.ui)
            ctx.ui.note("propose finished" if finished else "the interrupted propose had written nothing")
        if ctx.ui.json_mode:
            ctx.ui.result({"aborted": abort, "finished": finished})
        return 0
    ws = ctx.workspace()
    result = engine.propose(ws, ctx.ui, names, fork_owner=fork_owner, draft=draft, dry_run=dry_run, no_deps=no_deps,
                            environ=os.environ)
    if ctx.ui.json_mode:
        ctx.ui.result(result)
        return 0
    for proposal in result.proposals:
        pull = proposal.pull or "(a new pull request)"
        ctx.ui.plain(f"{proposal.name}: {escape(proposal.head)} -> {proposal.repository}:{proposal.base} "
                     f"{proposal.commit[:12]} ({proposal.push}): {pull} {proposal.url or ''}".rstrip())
        ctx.ui.plain(f"  {escape(proposal.message)}")
        if dry_run:
            ctx.ui.plain(f"\n# {escape(proposal.title)}\n\n{escape(proposal.body)}")
    for path in result.written:
        ctx.ui.note(f"marked submitted: {path.relative_to(ws.stack.root)}")
    if result.written:
        ctx.ui.note("run 'kpatch apply' so the worktrees' commits carry the new trailers (an export before that "
                    "would write the patch files without them)")
    return 0
