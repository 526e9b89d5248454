"""Torch operator schemas as structures: parse `name(Tensor! q, int n=1) -> ()` and compare two of them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

_TOKEN = re.compile(r"""\s*(?:
    (->|::)
  | ([A-Za-z_][A-Za-z0-9_]*|\$\d+)
  | (-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | ([()\[\],?!=*.|])
)""", re.VERBOSE)


class SchemaSyntaxError(ValueError):
    """A schema string torch would not accept; the message says where."""


class Alias(Enum):
    """How an argument aliases: not at all, read-only (`Tensor(a)`), or written (`Tensor!`, `Tensor(a!)`)."""

    NONE = "none"
    READ = "read"
    WRITE = "write"


@dataclass(frozen=True)
class Arg:
    """One argument or return: its type without alias marks, optionality, aliasing, name and default."""

    type: str  # e.g. "Tensor", "int[]", "(int, int)"; a trailing "?" is `optional`, alias marks are in `alias`
    optional: bool
    alias: Alias
    name: str
    default: str | None  # canonical text: "None", "True", "1e-10" as written, "'fp8'"; None when absent
    kwarg_only: bool = False

    def text(self) -> str:
        """The argument as a schema would spell it (alias written as `!` or `(a)`)."""
        mark = {Alias.NONE: "", Alias.READ: "(a)", Alias.WRITE: "!"}[self.alias]
        out = f"{self.type}{mark}{'?' if self.optional else ''}"
        out += f" {self.name}" if self.name else ""
        return out + (f"={self.default}" if self.default is not None else "")


@dataclass(frozen=True)
class Schema:
    """A parsed operator schema."""

    name: str
    overload: str
    args: tuple[Arg, ...]
    returns: tuple[Arg, ...]

    def text(self) -> str:
        """Canonical schema text (one space after commas)."""
        args, star = [], False
        for arg in self.args:
            if arg.kwarg_only and not star:
                args.append("*")
                star = True
            args.append(arg.text())
        rets = ", ".join(r.text() for r in self.returns)
        ret = rets if len(self.returns) == 1 and not self.returns[0].name else f"({rets})"
        full = self.name + (f".{self.overload}" if self.overload else "")
        return f"{full}({', '.join(args)}) -> {ret}"


class DiffKind(Enum):
    """What differs between two schemas of the same op."""

    ARITY = "arity"  # a different number of arguments
    ORDER = "order"  # the same argument names in another order
    NAME = "name"
    TYPE = "type"
    OPTIONAL = "optional"  # `Tensor` against `Tensor?`
    MUTABILITY = "mutability"  # `Tensor` against `Tensor!`
    DEFAULT = "default"  # `=None` present on one side only, or another value
    KWARG_ONLY = "kwarg-only"
    RETURNS = "returns"
    OVERLOAD = "overload"


@dataclass(frozen=True)
class SchemaDiff:
    kind: DiffKind
    detail: str  # "arg 9 position_ids: default None vs none"
    # False: harmless by itself (an added default), or harmful only to calls that rely on it (a renamed or a
    # missing defaulted argument), which the call-site check reports one by one
    breaking: bool = True


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.items: list[tuple[str, int]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            match = _TOKEN.match(text, pos)
            if not match:
                raise SchemaSyntaxError(f"unexpected {text[pos:].strip()[:20]!r} at column {pos + 1}")
            self.items.append((match.group(match.lastindex or 0), match.start(match.lastindex or 0)))
            pos = match.end()
        self.index = 0

    def peek(self, ahead: int = 0) -> str:
        i = self.index + ahead
        return self.items[i][0] if i < len(self.items) else ""

    def take(self, want: str | None = None) -> str:
        token = self.peek()
        if not token or (want is not None and token != want):
            where = self.items[self.index][1] + 1 if self.index < len(self.items) else len(self.text) + 1
            raise SchemaSyntaxError(f"expected {want or 'more'!r} at column {where}, got {token or 'the end'!r}")
        self.index += 1
        return token


def parse(text: str) -> Schema:
    """Parse one schema string (whitespace anywhere, as C++ string pieces join it, or as torch prints it with
    `ns::` and `($0! -> )` alias sets); raise SchemaSyntaxError."""
    toks = _Tokens(text)
    name = toks.take()
    if toks.peek() == "::":  # torch prints registered schemas with their namespace: `_C::name(...)`
        toks.take("::")
        name = toks.take()
    if not re.match(r"^[A-Za-z_]", name):
        raise SchemaSyntaxError(f"schema must start with an op name, got {name!r}")
    overload = ""
    if toks.peek() == ".":
        toks.take(".")
        overload = toks.take()
    toks.take("(")
    args: list[Arg] = []
    kwarg_only = False
    while toks.peek() != ")":
        if toks.peek() == "*":
            toks.take("*")
            kwarg_only = True
        else:
            args.append(_arg(toks, kwarg_only, need_name=True))
        if toks.peek() != ")":
            toks.take(",")
    toks.take(")")
    toks.take("->")
    returns = _returns(toks)
    if toks.peek():
        raise SchemaSyntaxError(f"unexpected {toks.peek()!r} after the return type")
    return Schema(name=name, overload=overload, args=tuple(args), returns=returns)


def _returns(toks: _Tokens) -> tuple[Arg, ...]:
    if toks.peek() != "(":
        return (_arg(toks, False, need_name=False),)
    # `(` starts either the return tuple or a tuple type; a return list is never a bare tuple type.
    toks.take("(")
    rets: list[Arg] = []
    while toks.peek() != ")":
        rets.append(_arg(toks, False, need_name=False))
        if toks.peek() != ")":
            toks.take(",")
    toks.take(")")
    return tuple(rets)


def _arg(toks: _Tokens, kwarg_only: bool, *, need_name: bool) -> Arg:
    base, alias, optional = _type(toks)
    name = ""
    if re.match(r"^[A-Za-z_]", toks.peek()):
        name = toks.take()
    elif need_name:
        raise SchemaSyntaxError(f"argument of type {base} has no name")
    default = None
    if toks.peek() == "=":
        toks.take("=")
        default = _default(toks)
    return Arg(type=base, optional=optional, alias=alias, name=name, default=default, kwarg_only=kwarg_only)


def _type(toks: _Tokens) -> tuple[str, Alias, bool]:
    """(type text without alias marks and top-level `?`, aliasing, optional)."""
    alias = Alias.NONE
    if toks.peek() == "(":
        toks.take("(")
        parts = []
        while toks.peek() != ")":
            part, _, opt = _type(toks)
            parts.append(part + ("?" if opt else ""))
            if toks.peek() != ")":
                toks.take(",")
        toks.take(")")
        base = f"({', '.join(parts)})"
    else:
        base = toks.take()
        if base in ("Dict", "Future", "RRef", "Await", "Union") and toks.peek() == "(":
            toks.take("(")
            inner = []
            while toks.peek() != ")":
                part, _, opt = _type(toks)
                inner.append(part + ("?" if opt else ""))
                if toks.peek() != ")":
                    toks.take(",")
            toks.take(")")
            base = f"{base}({', '.join(inner)})"
    optional = False
    while toks.peek() in ("(", "!", "[", "?"):
        token = toks.take()
        if token == "!":
            alias = Alias.WRITE
        elif token == "(":
            marks = []
            while toks.peek() != ")":
                marks.append(toks.take())
            toks.take(")")
            alias = Alias.WRITE if "!" in marks else Alias.READ
        elif token == "[":
            size = toks.take() if toks.peek() != "]" else ""
            toks.take("]")
            base = f"{base}{'?' if optional else ''}[{size}]"
            optional = False
        else:
            optional = True
    return base, alias, optional


def _default(toks: _Tokens) -> str:
    if toks.peek() == "[":
        toks.take("[")
        items = []
        while toks.peek() != "]":
            items.append(_default(toks))
            if toks.peek() != "]":
                toks.take(",")
        toks.take("]")
        return f"[{', '.join(items)}]"
    token = toks.take()
    if token.startswith(("'", '"')):
        return "'" + token[1:-1] + "'"
    return token


def _same_default(want: str | None, got: str | None) -> bool:
    if want is None or got is None:
        return want is got
    try:
        return float(want) == float(got)
    except ValueError:
        return want == got


def compare(want: Schema, got: Schema) -> list[SchemaDiff]:
    """Every structural difference of `got` (a registration) from `want` (the declaration); [] when equal."""
    diffs: list[SchemaDiff] = []
    if want.overload != got.overload:
        diffs.append(SchemaDiff(DiffKind.OVERLOAD, f"overload {want.overload!r} vs {got.overload!r}"))
    want_names, got_names = [a.name for a in want.args], [a.name for a in got.args]
    pairs = list(zip(want.args, got.args, strict=False))
    if want_names != got_names and sorted(want_names) == sorted(got_names):
        diffs.append(SchemaDiff(DiffKind.ORDER, f"order ({', '.join(want_names)}) vs ({', '.join(got_names)})"))
        by_name = {a.name: a for a in got.args}
        pairs = [(a, by_name[a.name]) for a in want.args]
    else:
        for index, arg in enumerate(want.args[len(got.args):], start=len(got.args) + 1):
            diffs.append(SchemaDiff(DiffKind.ARITY, f"arg {index} {arg.text()}: missing from the registration",
                                    breaking=arg.default is None))  # a defaulted one breaks only calls passing it
        for index, arg in enumerate(got.args[len(want.args):], start=len(want.args) + 1):
            diffs.append(SchemaDiff(DiffKind.ARITY, f"arg {index} {arg.text()}: only in the registration",
                                    breaking=arg.default is None))
    for index, (w, g) in enumerate(pairs, start=1):
        diffs += _arg_diffs(f"arg {index} {w.name}", w, g)
    if len(want.returns) != len(got.returns) or any(
            (w.type, w.optional, w.alias) != (g.type, g.optional, g.alias)
            for w, g in zip(want.returns, got.returns, strict=False)):
        wants = ", ".join(r.text() for r in want.returns) or "()"
        gots = ", ".join(r.text() for r in got.returns) or "()"
        diffs.append(SchemaDiff(DiffKind.RETURNS, f"returns ({wants}) vs ({gots})"))
    return diffs


def _arg_diffs(where: str, w: Arg, g: Arg) -> list[SchemaDiff]:
    diffs = []
    if w.name != g.name:  # breaks only calls that pass it by keyword: the call-site check sees those
        diffs.append(SchemaDiff(DiffKind.NAME, f"{where}: named {g.name!r}", breaking=False))
    if w.type != g.type:
        diffs.append(SchemaDiff(DiffKind.TYPE, f"{where}: {w.type} vs {g.type}"))
    if w.optional != g.optional:
        diffs.append(SchemaDiff(DiffKind.OPTIONAL, f"{where}: {w.text()} vs {g.text()}"))
    if w.alias != g.alias:
        diffs.append(SchemaDiff(DiffKind.MUTABILITY, f"{where}: {w.alias.value} vs {g.alias.value}"))
    if not _same_default(w.default, g.default):
        diffs.append(SchemaDiff(DiffKind.DEFAULT, f"{where}: default {w.default or 'none'} vs {g.default or 'none'}",
                                breaking=w.default is not None))
    if w.kwarg_only != g.kwarg_only:
        diffs.append(SchemaDiff(DiffKind.KWARG_ONLY, f"{where}: keyword-only {w.kwarg_only} vs {g.kwarg_only}"))
    return diffs


def breaking(diffs: list[SchemaDiff]) -> bool:
    """Whether a call that binds to the declared schema can fail against the registered one."""
    return any(d.breaking for d in diffs)


def binds(target: Schema, positional: int, keywords: tuple[str, ...]) -> str | None:
    """Why a call with `positional` arguments and these keywords does not bind to `target`; None when it does."""
    params = [a for a in target.args if not a.kwarg_only]
    if positional > len(params):
        return f"passes {positional} positional arguments, the schema takes {len(params)}"
    bound = {a.name for a in params[:positional]}
    names = {a.name for a in target.args}
    for key in keywords:
        if key not in names:
            return f"passes {key}=, the schema has no argument {key!r}"
        if key in bound:
            return f"passes {key} twice"
        bound.add(key)
    unbound = [a.name for a in target.args if a.name not in bound and a.default is None]
    if unbound:
        return f"leaves out {', '.join(unbound)}, which the schema gives no default"
    return None
