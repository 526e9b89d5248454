"""The algorithms: plan (check everything first), apply, rebase (classify, trial, culprit), export."""
