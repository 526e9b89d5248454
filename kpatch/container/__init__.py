"""The one Docker seam: the docker SDK, used by the wheel builds and the test runs."""
