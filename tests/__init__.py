"""kpatch's tests, by tier: each folder is one (unit, git, docker, sycl); support holds what they share."""
