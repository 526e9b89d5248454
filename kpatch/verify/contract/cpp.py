"""Op registrations read out of C++ source: `TORCH_LIBRARY*` blocks, their `def`s and `impl`s, with file:line."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Library block macros -> whether their second argument is a dispatch key (the *_IMPL ones).
_LIBRARY_MACROS = {
    "TORCH_LIBRARY": False, "TORCH_LIBRARY_FRAGMENT": False, "TORCH_LIBRARY_EXPAND": False,
    "STABLE_TORCH_LIBRARY": False, "STABLE_TORCH_LIBRARY_FRAGMENT": False,
    "TORCH_LIBRARY_IMPL": True, "TORCH_LIBRARY_IMPL_EXPAND": True, "STABLE_TORCH_LIBRARY_IMPL": True,
}
EXTENSION_NAME = "TORCH_EXTENSION_NAME"
CATCH_ALL = "CompositeImplicitAutograd"  # what `m.impl(name, fn)` with no key registers under
_ESCAPE = re.compile(r"\\(.)")
_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+|\\\n)
  | (?P<nl>\n)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<pp>\#(?:[^\n\\]|\\.|\\\n)*)
  | (?P<raw>R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)")
  | (?P<str>(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*")
  | (?P<chr>'(?:[^'\\\n]|\\.)*')
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>\d[\w.']*)
  | (?P<punct>::|->|.)
""", re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class Token:
    kind: str  # "id", "str", "num", "punct"
    text: str  # for "str": the literal's contents (escapes kept), for others the source text
    line: int


@dataclass(frozen=True)
class Definition:
    """`<lib>.def("schema")` inside a library block."""

    namespace: str
    schema: str  # the joined string literal(s)
    file: str
    line: int


@dataclass(frozen=True)
class Implementation:
    """`<lib>.impl("name", key, fn)` (or a def with a function): an op served for one dispatch key."""

    namespace: str
    op: str  # "name" or "name.overload"
    key: str  # "XPU", "CUDA", "CPU", "CompositeExplicitAutograd", ...
    file: str
    line: int


@dataclass(frozen=True)
class Registrations:
    definitions: tuple[Definition, ...]
    implementations: tuple[Implementation, ...]
    unresolved: tuple[str, ...]  # "file:line" of blocks whose namespace names TORCH_EXTENSION_NAME with no target


def tokens(source: str) -> list[Token]:
    """C++ tokens without comments and preprocessor lines; adjacent string literals stay separate tokens."""
    out: list[Token] = []
    line = 1
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup or "punct"
        text = match.group(0)
        if kind in ("str", "raw"):
            body = text[text.index('"') + 1:-1] if kind == "str" else match.group("raw")[2:-1]
            if kind == "raw":
                delim = match.group("delim")
                body = body[len(delim) + 1:len(body) - len(delim) - 1]
            out.append(Token("str", body, line))
        elif kind in ("id", "num", "punct", "chr"):
            out.append(Token("punct" if kind == "chr" else kind, text, line))
        line += text.count("\n")
    return out


def registrations(source: str, file: str, extension_names: tuple[str, ...]) -> Registrations:
    """Every def and impl in the library blocks of one C++ file. `extension_names`: what TORCH_EXTENSION_NAME
    is when this file is compiled (one per CMake target that lists it; empty when none does)."""
    toks = tokens(source)
    defs: list[Definition] = []
    impls: list[Implementation] = []
    unresolved: list[str] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.kind == "id" and tok.text in _LIBRARY_MACROS and _at(toks, i + 1, "("):
            args, after = _call_args(toks, i + 1)
            if after < len(toks) and toks[after].text == "{" and len(args) >= 2:
                end = _matching(toks, after)
                has_key = _LIBRARY_MACROS[tok.text]
                key = _dispatch_key(args[1]) if has_key else None
                var = args[-1][0].text if args[-1] else ""
                names = _namespaces(args[0], extension_names)
                if not names:
                    unresolved.append(f"{file}:{tok.line}")
                for namespace in names:
                    d, m = _block(toks[after + 1:end], namespace, var, key, file)
                    defs += d
                    impls += m
                i = end
        i += 1
    return Registrations(tuple(defs), tuple(impls), tuple(unresolved))


def _block(body: list[Token], namespace: str, var: str, key: str | None, file: str,
           ) -> tuple[list[Definition], list[Implementation]]:
    defs: list[Definition] = []
    impls: list[Implementation] = []
    for j in range(len(body) - 3):
        if body[j].text != var or body[j + 1].text != "." or body[j + 2].text not in ("def", "impl"):
            continue
        if not _at(body, j + 3, "("):
            continue
        args, _ = _call_args(body, j + 3)
        if not args:
            continue
        text = _string(args[0])
        if text is None:
            continue
        line = args[0][0].line
        if body[j + 2].text == "def":
            if "(" in text:
                defs.append(Definition(namespace, text, file, line))
            # `def("schema", fn)` (no tags): the function is a catch-all kernel
            if len(args) > 1 and args[1] and args[1][0].text != "{":
                impls.append(Implementation(namespace, op_name(text), CATCH_ALL, file, line))
            continue
        explicit = _dispatch_key(args[1]) if len(args) > 2 else None
        impls.append(Implementation(namespace, text, explicit or key or CATCH_ALL, file, line))
    return defs, impls


def op_name(schema: str) -> str:
    """The op name of a schema string (before its `(`)."""
    return schema.split("(", 1)[0].strip()


def _string(arg: list[Token]) -> str | None:
    """The joined adjacent string literals of an argument (also inside TORCH_SELECTIVE_SCHEMA(...))."""
    if len(arg) >= 3 and arg[0].text in ("TORCH_SELECTIVE_SCHEMA", "TORCH_SELECTIVE_NAME") and arg[1].text == "(":
        arg = arg[2:-1]
    if arg and all(t.kind == "str" for t in arg):
        return _ESCAPE.sub(lambda m: " " if m.group(1) in "ntr" else m.group(1), "".join(t.text for t in arg))
    return None


def _dispatch_key(arg: list[Token]) -> str | None:
    """`torch::kXPU`, `c10::DispatchKey::XPU`, `XPU` -> "XPU"; None when the argument is not a key."""
    if not arg or any(t.kind != "id" and t.text != "::" for t in arg):
        return None
    names = [t.text for t in arg if t.kind == "id"]
    last = names[-1]
    if len(names) >= 2 and names[-2] == "DispatchKey":
        return last
    if re.match(r"^k[A-Z]", last) and (len(names) == 1 or names[0] in ("torch", "c10", "at")):
        return last[1:]
    return last if len(names) == 1 else None


def _namespaces(arg: list[Token], extension_names: tuple[str, ...]) -> list[str]:
    """`_C` -> [_C]; `TORCH_EXTENSION_NAME` -> each target name; `CONCAT(TORCH_EXTENSION_NAME, _cache_ops)`."""
    if len(arg) == 1 and arg[0].kind == "id":
        return list(extension_names) if arg[0].text == EXTENSION_NAME else [arg[0].text]
    if arg and arg[0].text in ("CONCAT", "_CONCAT") and _at(arg, 1, "("):
        parts, _ = _call_args(arg, 1)
        if len(parts) == 2 and len(parts[1]) == 1:
            return [head + parts[1][0].text for head in _namespaces(parts[0], extension_names)]
    return []


def _at(toks: list[Token], index: int, text: str) -> bool:
    return index < len(toks) and toks[index].text == text


def _matching(toks: list[Token], start: int) -> int:
    """Index of the bracket closing the one at `start` (or the last token)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    close, depth = pairs[toks[start].text], 0
    for k in range(start, len(toks)):
        if toks[k].text == toks[start].text:
            depth += 1
        elif toks[k].text == close:
            depth -= 1
            if depth == 0:
                return k
    return len(toks) - 1


def _call_args(toks: list[Token], open_paren: int) -> tuple[list[list[Token]], int]:
    """The comma-separated arguments of the call whose `(` is at `open_paren`, and the index after `)`."""
    end = _matching(toks, open_paren)
    args: list[list[Token]] = [[]]
    depth = 0
    for tok in toks[open_paren + 1:end]:
        if tok.text in ("(", "{", "[") and tok.kind == "punct":
            depth += 1
        elif tok.text in (")", "}", "]") and tok.kind == "punct":
            depth -= 1
        if tok.text == "," and tok.kind == "punct" and depth == 0:
            args.append([])
        else:
            args[-1].append(tok)
    return ([] if args == [[]] else args), end + 1
