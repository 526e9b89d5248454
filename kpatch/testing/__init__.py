"""kpatch test: each upstream's suite in the build image against the pair installed from its lock; JUnit reports."""
