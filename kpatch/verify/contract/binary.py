"""Op registrations read out of a built extension module (an ELF `.so`): the libraries its `TORCH_LIBRARY*` blocks
define (their static-init symbols), the schema strings each block's function loads, and the dispatch key of each
`TORCH_LIBRARY_IMPL` block. What the binary does not say (the key of an `impl` inside a `TORCH_LIBRARY` block, the
library of a schema when several blocks share a module and their code cannot be read) is said, never guessed."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from kpatch.verify.contract import schema
from kpatch.verify.contract.cpp import Definition, Implementation, Registrations

UNKNOWN_KEY = "?"  # an op a library defines whose dispatch keys the binary does not say
# `_ZL21TORCH_LIBRARY_init__C...` (a static function) or the plain name (C, or a compiler that does not mangle it)
_SYMBOL = re.compile(r"^(?:_ZL(\d+))?(TORCH_LIBRARY(?:_FRAGMENT|_IMPL)?_(?:static_)?init_\w+)")
_IMPL = re.compile(r"^TORCH_LIBRARY_IMPL_(static_)?init_(\w+)_([A-Za-z][A-Za-z0-9]*)_(\d+)$")
_DEF = re.compile(r"^TORCH_LIBRARY_(static_)?init_(\w+)$")
_FRAGMENT = re.compile(r"^TORCH_LIBRARY_FRAGMENT_(static_)?init_(\w+)_(\d+)$")
_RUN = re.compile(rb"[\t\n\x20-\x7e]{6,}\x00")
_OP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?$")
_X86_64 = 0x3E


class NotElf(ValueError):
    """The file is not a 64-bit little-endian ELF shared object."""


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int


@dataclass(frozen=True)
class Library:
    """One `TORCH_LIBRARY*` block of the module, as its symbols name it."""

    namespace: str
    key: str | None  # the dispatch key of a TORCH_LIBRARY_IMPL block; None for a defining block
    start: int  # the address and size of its init function (0, 0: not in the symbol table)
    size: int


@dataclass(frozen=True)
class ModuleRegistrations:
    registrations: Registrations
    libraries: tuple[Library, ...]
    problems: tuple[str, ...]  # "file: ..." what cannot be read, so the contract cannot pass on it


class _Elf:
    def __init__(self, data: bytes) -> None:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise NotElf("not a 64-bit little-endian ELF file")
        self.data = data
        self.machine = struct.unpack_from("<H", data, 0x12)[0]
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = raw[shstrndx][4] if shstrndx < len(raw) else 0
        self.sections = [_Section(self.cstr(names + r[0]) if names else "", r[1], r[2], r[3], r[4], r[5], r[6])
                         for r in raw]

    def cstr(self, offset: int) -> str:
        end = self.data.find(b"\0", offset)
        return self.data[offset:end].decode("latin-1")

    def symbols(self) -> list[tuple[str, int, int, int]]:
        """(name, value, size, type) of the full symbol table (.symtab), else the dynamic one."""
        tables = [s for s in self.sections if s.type == 2] or [s for s in self.sections if s.type == 11]
        out = []
        for table in tables:
            strtab = self.sections[table.link]
            for k in range(table.size // 24):
                name, info, _, _, value, size = struct.unpack_from("<IBBHQQ", self.data, table.offset + k * 24)
                out.append((self.cstr(strtab.offset + name), value, size, info & 0xF))
        return out

    def file_offset(self, addr: int) -> int | None:
        for s in self.sections:
            if s.type != 8 and s.addr and s.addr <= addr < s.addr + s.size:  # 8: NOBITS (.bss)
                return s.offset + addr - s.addr
        return None

    def rodata(self) -> list[_Section]:
        return [s for s in self.sections if s.name.startswith(".rodata") and s.type == 1]


def read(data: bytes, file: str) -> ModuleRegistrations:
    """The registrations of one extension module; raises NotElf for a file that is not one."""
    elf = _Elf(data)
    libraries = _libraries(elf)
    if not libraries:
        count = len(_schema_strings(elf))
        return ModuleRegistrations(Registrations((), (), ()), (), (f"{file}: holds {count} op schema(s) but no symbol "
                                   "names a library that defines them (a stripped binary?)",) if count else ())
    defining = sorted({lib.namespace for lib in libraries if lib.key is None})
    defs: list[Definition] = []
    impls: list[Implementation] = []
    problems: list[str] = []
    loaded: dict[Library, list[str]] = {lib: _loaded_strings(elf, lib) for lib in libraries if lib.size}
    seen: set[str] = set()
    for lib, strings in loaded.items():
        for text in strings:
            if lib.key is None and _is_schema(text):
                defs.append(Definition(lib.namespace, text, file, 0))
                seen.add(text)
            elif lib.key is not None and _OP_NAME.match(text):
                impls.append(Implementation(lib.namespace, text, lib.key, file, 0))
    # Schemas no readable block function loads: the module's only defining library has them; with several, which
    # one does is not in the binary.
    rest = [t for t in _schema_strings(elf) if t not in seen]
    if rest and len(defining) == 1:
        defs += [Definition(defining[0], text, file, 0) for text in rest]
    elif rest and defining:
        problems += [f"{file}: defines libraries {', '.join(defining)}; which one defines "
                     f"'{schema_name(text)}' cannot be read from the binary" for text in rest]
    have = {d.namespace for d in defs}
    problems += [f"{file}: defines library {ns}, but none of its schema strings is in the binary (a compiler can "
                 "fold a short literal into code): its ops cannot be read" for ns in defining if ns not in have]
    for d in defs:  # a defining block's own impls carry no readable key
        impls.append(Implementation(d.namespace, schema_name(d.schema), UNKNOWN_KEY, file, 0))
    return ModuleRegistrations(Registrations(tuple(defs), tuple(impls), ()), tuple(libraries), tuple(problems))


def schema_name(text: str) -> str:
    return text.split("(", 1)[0].strip()


def _libraries(elf: _Elf) -> list[Library]:
    """The module's library blocks from their static-init objects and init functions' symbols."""
    found: dict[tuple[str, str | None, str], Library] = {}
    for raw, value, size, kind in elf.symbols():
        match = _SYMBOL.match(raw)
        if not match:
            continue
        name = match.group(2)[:int(match.group(1))] if match.group(1) else match.group(2)
        parsed = _parse_symbol(name)
        if parsed is None:
            continue
        namespace, key, uid, static = parsed
        ident = (namespace, key, uid)
        if static:
            found.setdefault(ident, Library(namespace, key, 0, 0))
        elif kind == 2 and size:  # FUNC
            found[ident] = Library(namespace, key, value, size)
    return list(found.values())


def _parse_symbol(name: str) -> tuple[str, str | None, str, bool] | None:
    """(namespace, dispatch key or None, uid, is the static-init object) of a block symbol."""
    if m := _IMPL.match(name):
        return m.group(2), m.group(3), m.group(4), bool(m.group(1))
    if m := _FRAGMENT.match(name):
        return m.group(2), None, m.group(3), bool(m.group(1))
    if m := _DEF.match(name):
        return m.group(2), None, "", bool(m.group(1))
    return None


def _loaded_strings(elf: _Elf, lib: Library) -> list[str]:
    """The C strings an init function loads by RIP-relative `lea` (x86-64); none on another machine."""
    start = elf.file_offset(lib.start)
    if elf.machine != _X86_64 or start is None:
        return []
    body = elf.data[start:start + lib.size]
    rodata = [(s.addr, s.addr + s.size) for s in elf.rodata()]
    out: list[str] = []
    for i in range(len(body) - 6):
        if body[i] in (0x48, 0x4C) and body[i + 1] == 0x8D and (body[i + 2] & 0xC7) == 0x05:
            target = lib.start + i + 7 + struct.unpack_from("<i", body, i + 3)[0]
            if any(lo <= target < hi for lo, hi in rodata):
                offset = elf.file_offset(target)
                if offset is not None:
                    text = elf.cstr(offset)
                    if text and all(c.isprintable() or c in "\t\n" for c in text):
                        out.append(text)
    return list(dict.fromkeys(out))


def _schema_strings(elf: _Elf) -> list[str]:
    """Every string in the read-only data that parses as an op schema."""
    out = []
    for section in elf.rodata():
        for match in _RUN.finditer(elf.data, section.offset, section.offset + section.size):
            text = match.group()[:-1].decode("ascii")
            if _is_schema(text):
                out.append(text)
    return list(dict.fromkeys(out))


def _is_schema(text: str) -> bool:
    if "(" not in text or "->" not in text or not re.match(r"^[A-Za-z_][\w.]*\(", text):
        return False
    try:
        schema.parse(text)
    except schema.SchemaSyntaxError:
        return False
    return True
