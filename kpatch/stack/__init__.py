"""The patch stack on disk: series files, mbox patches and their trailers, the diff paths, the writer."""

from kpatch.stack.mbox import Patch, PatchRef, UpstreamStatus, added_file, added_text, parse_patch, parse_patch_text
from kpatch.stack.series import SERIES, Series, load_series, parse_dropped, parse_series_text

__all__ = ["SERIES", "Patch", "PatchRef", "Series", "UpstreamStatus", "added_file", "added_text", "load_series",
           "parse_dropped", "parse_patch", "parse_patch_text", "parse_series_text"]
