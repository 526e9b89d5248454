"""Edit the example project's kpatch.toml in tests: one upstream's build command, found by its table."""

from __future__ import annotations

import json

from kpatch.examples.upstreams import PEP517_BUILD


def with_build_command(text: str, upstream: str, command: str) -> str:
    """`text` with `upstream`'s `[upstream.build]` command replaced by `command` (a JSON string is a TOML basic
    string)."""
    start = text.index(f'name = "{upstream}"')
    build = text.index("[upstream.build]", start)
    old = f'command = "{PEP517_BUILD}"'
    at = text.index(old, build)
    value = json.dumps(command)
    return text[:at] + f"command = {value}" + text[at + len(old):]


def with_build_key(text: str, upstream: str, line: str) -> str:
    """`text` with `line` (`key = value`) added at the top of `upstream`'s `[upstream.build]` table."""
    start = text.index(f'name = "{upstream}"')
    header = text.index("[upstream.build]\n", start) + len("[upstream.build]\n")
    return text[:header] + line + "\n" + text[header:]


def one_upstream(url: object, base: str) -> str:
    """kpatch.toml of a project with one upstream `up` (branch main, its patches in patches/up) at `base`."""
    return (f'version = 1\n\n[[upstream]]\nname = "up"\nurl = "{url}"\nbranch = "main"\nbase = "{base}"\n'
            'patches = "patches/up"\nrequires = []\n')
