"""kpatch.toml: the model (model.py), reading and checking it (load.py, tables.py), editing it (edit.py)."""

from kpatch.config.edit import with_line_bases_of, with_new_bases
from kpatch.config.load import find_config, load, parse_assignments, with_url_overrides
from kpatch.config.model import (
    CONFIG_NAME,
    CONFIG_VERSION,
    DEFAULT_TEST_TIMEOUT,
    DEVICE_KINDS,
    MAIN,
    NAME_RE,
    SHA_RE,
    Build,
    CudaOnly,
    Line,
    LineUpstream,
    Stack,
    TestSuite,
    Upstream,
)

__all__ = ["CONFIG_NAME", "CONFIG_VERSION", "DEFAULT_TEST_TIMEOUT", "DEVICE_KINDS", "MAIN", "NAME_RE", "SHA_RE",
           "Build", "CudaOnly", "Line", "LineUpstream", "Stack", "TestSuite", "Upstream", "find_config", "load",
           "parse_assignments", "with_line_bases_of", "with_new_bases", "with_url_overrides"]
