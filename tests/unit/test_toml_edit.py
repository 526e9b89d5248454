"""kpatch.toml as rebase rewrites it: the new bases go where they belong, and nothing else moves."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kpatch.config import with_new_bases

K, A = "1" * 40, "2" * 40
LAYOUTS = {
    "comments on headers": (
        '[[upstream]]  # app\nname = "app"\nbase = "v1.0"\n\n[[upstream]] # kernels\nname = "kernels"\nbase = "x"\n',
        '[[upstream]]  # app\nname = "app"\nbase = "{A}"\n\n[[upstream]] # kernels\nname = "kernels"\nbase = "{K}"\n'),
    "spaces in a header": (
        '[[ upstream ]]\nname = "kernels"\nbase = "x"  # pinned\n',
        '[[ upstream ]]\nname = "kernels"\nbase = "{K}"  # pinned\n'),
    "keys in another order and quoted": (
        '[[upstream]]\n"base" = "x"\npatches = "p"\n"name" = "kernels"\n',
        '[[upstream]]\n"base" = "{K}"\npatches = "p"\n"name" = "kernels"\n'),
    "inline build table and a literal string": (
        "[[upstream]]\nname = 'app'\nbuild = { command = \"make\", env = { A = \"1\" } }\nbase = 'v1'\n",
        "[[upstream]]\nname = 'app'\nbuild = {{ command = \"make\", env = {{ A = \"1\" }} }}\nbase = '{A}'\n"),
    "a multi-line literal string becomes a one-line literal": (
        "[[upstream]]\nname = 'app'\nbase = \'\'\'v1\'\'\'  # odd but valid\n",
        "[[upstream]]\nname = 'app'\nbase = '{A}'  # odd but valid\n"),
    "a multi-line basic string becomes a one-line basic": (
        '[[upstream]]\nname = "app"\nbase = """v1"""\n',
        '[[upstream]]\nname = "app"\nbase = "{A}"\n'),
    "base-commit dropped, its neighbours kept": (
        '[[upstream]]\nname = "app"\nbase = "v1"\nbase-commit = "{K}"  # checked\nbranch = "main"\n',
        '[[upstream]]\nname = "app"\nbase = "{A}"\nbranch = "main"\n'),
    "a header in a comment and a sub-table": (
        '# [[upstream]] kernels is first\n[[upstream]]\nname = "kernels"\nbase = "x"\n\n[upstream.build]\n'
        'command = "make"\n\n[[upstream]]\nname = "app"\nbase = "y"\n',
        '# [[upstream]] kernels is first\n[[upstream]]\nname = "kernels"\nbase = "{K}"\n\n[upstream.build]\n'
        'command = "make"\n\n[[upstream]]\nname = "app"\nbase = "{A}"\n'),
    "an upstream not rebased": (
        '[[upstream]]\nname = "other"\nbase = "v9"   # untouched\n',
        '[[upstream]]\nname = "other"\nbase = "v9"   # untouched\n'),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_new_bases_land_in_their_tables_and_the_rest_stays_byte_identical(tmp_path: Path, layout: str) -> None:
    written, expected = LAYOUTS[layout]
    path = tmp_path / "kpatch.toml"
    path.write_text("version = 1  # the format\n\n" + written.replace("{K}", K))
    result = with_new_bases(path, {"kernels": K, "app": A}).decode()
    assert result == "version = 1  # the format\n\n" + expected.format(K=K, A=A)
    data = tomllib.loads(result)
    assert all(u["base"] == {"kernels": K, "app": A}.get(u["name"], u["base"]) and "base-commit" not in u
               for u in data["upstream"])


def test_crlf_line_ends_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "kpatch.toml"
    path.write_bytes(b'version = 1\r\n\r\n[[upstream]]  # k\r\nname = "kernels"\r\nbase = "x"\r\n')
    assert with_new_bases(path, {"kernels": K}) == f'version = 1\r\n\r\n[[upstream]]  # k\r\nname = "kernels"\r\n' \
                                                   f'base = "{K}"\r\n'.encode()
