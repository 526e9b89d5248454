"""What upstream code (a build, a test suite) saw of its interpreter and environment: a command that prints it
as one `seen:` line, that line read back, and credentials to set in kpatch's environment that must not reach it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

SEEN = ("python3 -c 'import json, os, sys, sysconfig, wheel, setuptools; print(\"seen:\", json.dumps("
        "{\"prefix\": sys.prefix, \"base\": sys.base_prefix, \"path\": sys.path, \"env\": dict(os.environ)}))'")
SECRETS = {"GITHUB_TOKEN": "ghp_0123456789abcdefABCDEF", "PYPI_TOKEN": "pypi-AgEIcHlwaS5vcmcsecret",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "MY_PASSWORD": "hunter2hunter2"}


class Seen(TypedDict):
    """What SEEN prints: the interpreter's prefixes and sys.path, and the environment."""

    prefix: str
    base: str
    path: list[str]
    env: dict[str, str]


def seen(log: Path) -> Seen:
    """The `seen:` line SEEN printed into `log`."""
    line = next(line for line in log.read_text().splitlines() if "seen: {" in line)
    got: Seen = json.loads(line.split("seen: ", 1)[1])
    return got
