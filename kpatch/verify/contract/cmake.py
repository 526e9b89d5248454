"""Which CMake extension target compiles each source file: what TORCH_EXTENSION_NAME is in it.

A small reader, not a CMake interpreter: `set`, `list(APPEND)`, `file(GLOB)`, `include` and
`define_*extension_target(NAME ... SOURCES ...)` are followed in file order; `if()` branches are all taken, so a
file listed by a target in any configuration maps to that target.
"""

from __future__ import annotations

import re
from pathlib import Path

_COMMAND = re.compile(r"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\(", re.MULTILINE)
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"|\[(=*)\[(.*?)\]\2\]|([^\s()"#]+)', re.DOTALL)
_VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
_TARGET_KEYWORDS = {"DESTINATION", "LANGUAGE", "SOURCES", "COMPILE_FLAGS", "LINK_FLAGS", "ARCHITECTURES",
                    "INCLUDE_DIRECTORIES", "USE_SABI", "LIBRARIES", "WITH_SOABI"}
_SET_KEYWORDS = {"CACHE", "PARENT_SCOPE", "FORCE"}


def extension_targets(root: Path) -> dict[str, tuple[str, ...]]:
    """Source path (relative to `root`, posix) -> the extension targets that compile it, from CMakeLists.txt."""
    top = root / "CMakeLists.txt"
    found: dict[str, list[str]] = {}
    if top.is_file():
        _read(root, top, {"CMAKE_CURRENT_LIST_DIR": str(top.parent), "CMAKE_SOURCE_DIR": str(root),
                          "CMAKE_CURRENT_SOURCE_DIR": str(root)}, found, set())
    return {path: tuple(dict.fromkeys(names)) for path, names in found.items()}


def _read(root: Path, file: Path, env: dict[str, str], found: dict[str, list[str]], seen: set[Path]) -> None:
    if file in seen:
        return
    seen.add(file)
    text = _strip_comments(file.read_text(encoding="utf-8", errors="replace"))
    env = {**env, "CMAKE_CURRENT_LIST_DIR": str(file.parent)}
    for match in _COMMAND.finditer(text):
        name = match.group(1).lower()
        body = _body(text, match.end())
        if name not in ("set", "list", "file", "include") and "extension_target" not in name:
            continue
        args = _expand(_args(body), env)
        if name == "set" and args:
            env[args[0]] = ";".join(a for a in args[1:] if a not in _SET_KEYWORDS)
        elif name == "list" and len(args) >= 2 and args[0] == "APPEND":
            env[args[1]] = ";".join([*_values(env.get(args[1], "")), *args[2:]])
        elif name == "file" and len(args) >= 3 and args[0] in ("GLOB", "GLOB_RECURSE"):
            env[args[1]] = ";".join(_glob(root, root, [a for a in args[2:] if a != "CONFIGURE_DEPENDS"]))
        elif name == "include" and args:
            included = _resolve(root, file.parent, args[0])
            if included.suffix != ".cmake" and not included.is_file():
                included = included.with_suffix(".cmake")
            if included.is_file() and included.is_relative_to(root):
                _read(root, included, env, found, seen)
        elif "extension_target" in name and args:
            for source in _sources(args[1:]):
                path = _resolve(root, root, source)  # relative to the source dir, not the included file
                if path.is_relative_to(root):
                    found.setdefault(path.relative_to(root).as_posix(), []).append(args[0])


def _sources(args: list[str]) -> list[str]:
    out, taking = [], False
    for arg in args:
        if arg in _TARGET_KEYWORDS:
            taking = arg == "SOURCES"
        elif taking:
            out.append(arg)
    return out


def _strip_comments(text: str) -> str:
    """Drop `# ...` line comments (not `#` inside quotes or `#[[` brackets, which CMake bindings rarely use)."""
    out = []
    for line in text.splitlines():
        quoted = False
        for i, char in enumerate(line):
            if char == '"' and (i == 0 or line[i - 1] != "\\"):
                quoted = not quoted
            elif char == "#" and not quoted:
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


def _body(text: str, start: int) -> str:
    depth, i, quoted = 1, start, False
    while i < len(text) and depth:
        char = text[i]
        if char == '"' and text[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
        i += 1
    return text[start:i - 1]


def _args(body: str) -> list[str]:
    return [m.group(1) if m.group(1) is not None else m.group(3) if m.group(3) is not None else m.group(4)
            for m in _ARG.finditer(body)]


def _expand(args: list[str], env: dict[str, str]) -> list[str]:
    out: list[str] = []
    for arg in args:
        for _ in range(5):  # nested ${${X}} is rare; a few rounds cover ${A}/${B}
            arg = _VAR.sub(lambda m: env.get(m.group(1), ""), arg)
        out += _values(arg) if ";" in arg else ([arg] if arg else [])
    return out


def _values(text: str) -> list[str]:
    return [v for v in text.split(";") if v]


def _resolve(_root: Path, here: Path, name: str) -> Path:
    path = Path(name)
    return (path if path.is_absolute() else here / path).resolve()


def _glob(_root: Path, here: Path, patterns: list[str]) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        base = Path(pattern) if Path(pattern).is_absolute() else here / pattern
        anchor = Path(base.anchor)
        out += sorted(str(p) for p in anchor.glob(str(base.relative_to(anchor))) if p.is_file())
    return out
