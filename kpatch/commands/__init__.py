"""One module per command (the top floor): its click options, the one call down into the work packages, its
human output and its --json result (kpatch/commands/schemas/). Only kpatch/cli.py imports them."""
