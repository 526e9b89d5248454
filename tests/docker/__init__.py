"""A Docker engine and the local base image (scripts/docker-test-image): builds, test runs, the demo, nights."""
