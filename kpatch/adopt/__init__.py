"""Starting and adopting a project: `kpatch init` (init.py, with the workflow it writes in data/), `kpatch import`
of a fork branch (branch.py) or a folder of patches (quilt.py), the `Requires:` a patch needs (suggest.py, from the
op contract), and `kpatch propose` (propose.py: patches as pull requests from a fork). Above verify, whose contract
it reads."""
