"""Small but real wheel files made in memory (METADATA, WHEEL, RECORD with true hashes), and the test
stand-in for torch built from them."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

from packaging.utils import canonicalize_name

STANDIN_LABEL = "standin"  # torch versions built here end in +standin: never PyTorch


def make_wheel(name: str, version: str, *, tag: str = "py3-none-any", requires: tuple[str, ...] = (),
               files: dict[str, str] | None = None, metadata: str | bytes | None = None) -> tuple[str, bytes]:
    """(file name, bytes) of a wheel; `metadata` replaces the METADATA text when given."""
    stem = f"{canonicalize_name(name).replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    meta = metadata if metadata is not None else (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires) + "\nA test wheel.\n")
    members: dict[str, str | bytes] = {**(files or {}), f"{info}/METADATA": meta,
               f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: kpatch-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    raw = {path: text.encode() if isinstance(text, str) else text for path, text in members.items()}
    record = "".join(f"{path},sha256={_digest(data)},{len(data)}\n" for path, data in raw.items())
    raw[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in raw.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return f"{stem}-{tag}.whl", buffer.getvalue()


def torch_standin(public: str) -> tuple[str, bytes]:
    """A wheel named `torch`, version `<public>+standin`: a TEST STAND-IN with no PyTorch in it, so builds can
    install, pin and report "torch" without a multi-GB download."""
    version = f"{public}+{STANDIN_LABEL}"
    source = (f'"""Test stand-in for torch (kpatch tests): NOT PyTorch."""\n__version__ = "{version}"\n'
              "STANDIN = True\n")
    return make_wheel("torch", version, files={"torch/__init__.py": source})


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
