"""Adopting a fork: `kpatch import` of a fork branch (branch.py) or a folder of patches (quilt.py), and the
`Requires:` a patch needs (suggest.py, from the op contract). Above verify, whose contract it reads."""
