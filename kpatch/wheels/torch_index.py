"""The torch index (PyTorch's XPU wheels, or `[release] torch-index`): torch's wheels of one version, each with its
URL and sha256, for a release lock that names torch as its third member."""

from __future__ import annotations

from typing import Any

from kpatch.errors import BuildError


def torch_wheels(index_url: str, version: str) -> list[dict[str, Any]]:
    """torch `version`'s wheels on a PEP 503 index, each with its URL and sha256 (from the link's fragment)."""
    # imported where used: urllib and the HTML parser only when the torch index is read
    from html.parser import HTMLParser
    from urllib.error import URLError
    from urllib.parse import urldefrag, urljoin
    from urllib.request import urlopen

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import Version

    page = f"{index_url.rstrip('/')}/torch/"
    links: list[str] = []

    class Links(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            href = dict(attrs).get("href")
            if tag == "a" and href:
                links.append(href)

    try:
        with urlopen(page, timeout=60) as answer:  # noqa: S310  # an index URL from kpatch.toml or the default
            Links().feed(answer.read().decode("utf-8", "replace"))
    except (URLError, OSError, ValueError) as err:
        raise BuildError(f"cannot read the torch index {page}: {getattr(err, 'reason', err)}") from None
    wheels = []
    for href in links:
        url, fragment = urldefrag(urljoin(page, href))
        name = url.rsplit("/", 1)[-1].replace("%2B", "+")
        try:
            _, found, _, _ = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if found == Version(version) and fragment.startswith("sha256="):
            wheels.append({"name": name, "url": url, "hashes": {"sha256": fragment.removeprefix("sha256=")}})
    if not wheels:
        raise BuildError(f"the torch index {page} has no wheel of torch {version} with a sha256: the release lock "
                         "could not name its torch ([release] torch-index in kpatch.toml names another index)")
    return wheels
