"""What a build runs in: an image on the engine (or this host), named and identified; shared by the Docker seam,
the wheel builds and the test runs."""

from __future__ import annotations

from dataclasses import dataclass

TAIL = 15  # lines of a failed build's log shown with its error


@dataclass(frozen=True)
class Toolchain:
    """What the wheels are built with: it goes into every cache key and into the lock."""

    reference: str  # the image reference, or "local"
    digest: str  # the image ID, or a hash of the host's Python and compiler
    base: str = ""  # the BASE_IMAGE the image was built from, and that image's ID
    base_digest: str = ""
