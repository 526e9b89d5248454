"""Installed distributions written by hand (files + a dist-info with METADATA and a true RECORD), for tests that
need an environment without building and installing a wheel."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path


def install_dist(site: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """Write `files` under `site` as the installed distribution `name` `version`; return its dist-info folder."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("test\n")
    rows = []
    for rel, text in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(text.encode())}")
    rows += [f"{info.name}/{n}," for n in ("METADATA", "INSTALLER", "RECORD")]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info
