"""The algorithms: plan (check everything first), apply, rebase (classify, trial, culprit), export, and the reads
built on them (status: each patch's state by patch-id; diff; evidence). Starting a project (init) and proposing
patches live in kpatch/adopt/."""
