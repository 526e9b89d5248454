"""`python -m kpatch` runs the command line."""

from kpatch.cli import main

main()
