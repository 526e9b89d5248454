"""What the Kimi-K3 SYCL kernel tests share: kernel sources read from the patch files, one harness run per test,
the case matrix, poisoned buffers and the bit-level comparisons."""

from __future__ import annotations

import itertools
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

from kpatch.stack import added_file, load_series

ROOT = Path(__file__).resolve().parents[2]
POISON = {torch.bfloat16: 0x7FC1, torch.float16: 0x7E01}  # NaN bit patterns no kernel result can produce
POISON_U8 = 0xFF  # -NaN in E4M3: every E4M3 NaN these kernels write is 0x7F
LOCAL = 128
MAX_POSITION = 300
SUFFIX = {torch.bfloat16: "bf16", torch.float16: "f16"}


def patch_file(name: str, upstream: str = "vllm-xpu-kernels") -> str:
    """The full text of a file exactly as a patch in the stack creates it (the patch is its only copy)."""
    series = load_series(upstream, ROOT / "patches" / upstream)
    patch = next(p for p in series.patches if name in p.paths)
    return added_file(patch.path, name)


@dataclass(frozen=True)
class Case:
    rope: bool
    tokens: int
    heads: int
    block_size: int
    strided: bool

    @property
    def id(self) -> str:
        return (f"{'rope' if self.rope else 'nope'}-T{self.tokens}-H{self.heads}-bs{self.block_size}-"
                f"{'strided' if self.strided else 'contig'}")


def cases() -> list[Case]:
    """RoPE on/off x tokens {1, 5, 37, 256} x heads {1, 8, 16}; block sizes and layouts rotate through."""
    result = []
    for index, (rope, tokens, heads) in enumerate(itertools.product((False, True), (1, 5, 37, 256), (1, 8, 16))):
        result.append(Case(rope, tokens, heads, block_size=(1, 16, 64)[index % 3], strided=index % 2 == 1))
    return result


class Launcher:
    """Writes owner tensors to files, builds the launch plan, runs the harness once, reads the owners back."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.owners: list[tuple[torch.Tensor, Path]] = []
        self.lines: list[str] = []

    def buf(self, view: torch.Tensor | None, owner: torch.Tensor | None = None) -> str:
        if view is None:
            return "null"
        owner = view if owner is None else owner
        assert owner.is_contiguous() and owner.storage_offset() == 0
        assert view.untyped_storage().data_ptr() == owner.untyped_storage().data_ptr()
        path = next((p for o, p in self.owners if o is owner), None)
        if path is None:
            path = self.folder / f"t{len(self.owners)}.bin"
            path.write_bytes(owner.view(torch.uint8).numpy().tobytes())
            self.owners.append((owner, path))
        return f"buf:{path}+{view.storage_offset() * view.element_size()}"

    def launch(self, kernel: str, items: int, args: list[str | int]) -> None:
        global_size = max(LOCAL, math.ceil(items / LOCAL) * LOCAL)
        words = [a if isinstance(a, str) else f"i64:{a}" for a in args]
        self.lines.append(" ".join([kernel, str(global_size), str(LOCAL), *words]))

    def run(self, run_kernel: Path, env: dict[str, str], source: str, includes: dict[str, str] | None = None) -> str:
        """Compile `source` (with `includes` as its #include files), run every launch, read the owners back."""
        path = self.folder / "kernels.cpp"
        path.write_text(source)
        args = [str(run_kernel), str(path), str(self.folder / "plan.txt")]
        for name, text in (includes or {}).items():
            (self.folder / name).write_text(text)
            args.append(f"{name}={self.folder / name}")
        (self.folder / "plan.txt").write_text("\n".join(self.lines) + "\n")
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        for owner, file in self.owners:
            data = torch.frombuffer(bytearray(file.read_bytes()), dtype=torch.uint8)
            owner.view(torch.uint8).copy_(data.view(owner.view(torch.uint8).shape))
        return proc.stdout


def rand(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    x = (torch.randn(shape, generator=gen) * 1.5 + 0.25).to(dtype)
    x[x == 0] = 0.5  # never zeros: a kernel that writes nothing must not pass by luck
    return x


def poisoned(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.uint8:
        return torch.full(shape, POISON_U8, dtype=torch.uint8)
    return torch.full(shape, POISON[dtype], dtype=torch.int16).view(dtype)


def cos_sin(strided: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(view, owner) of a [MAX_POSITION, 64] fp32 cos|sin cache; strided rows when asked."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64))
    freqs = torch.arange(MAX_POSITION, dtype=torch.float32)[:, None] * inv_freq[None, :]
    table = torch.cat([freqs.cos(), freqs.sin()], dim=-1)
    if not strided:
        return table, table
    owner = torch.full((MAX_POSITION, 96), float("nan"))
    owner[:, :64] = table
    return owner[:, :64], owner


def paged_cache(case: Case, dtype: torch.dtype, entry: int,
                gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(cache view, owner, slots): poisoned cache of `entry`-wide rows (padded by 16 bytes per row when strided),
    non-sequential slots with some -1."""
    blocks = math.ceil(2 * case.tokens / case.block_size) + 1
    pad = 16 // (1 if dtype == torch.uint8 else 2) if case.strided else 0
    owner = poisoned((blocks, case.block_size, entry + pad), dtype)
    slots = torch.randperm(blocks * case.block_size, generator=gen)[: case.tokens].to(torch.int64)
    slots[3::7] = -1
    if case.tokens > 1:
        slots[-1] = -1
    return owner[..., :entry], owner, slots


def check(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    """Bit-exact everywhere: bytes, 16-bit values, rotated ones included (the reference rounds as CUDA does)."""
    if got.dtype == torch.uint8:
        bad = got != want
    else:
        bad = got.contiguous().view(torch.int16) != want.contiguous().view(torch.int16)
    if bad.any():
        first = bad.nonzero()[0].tolist()
        raise AssertionError(f"{name}: {int(bad.sum())} elements wrong, first at {first}: "
                             f"got {got[tuple(first)].item()!r}, want {want[tuple(first)].item()!r}")


def is_poison(x: torch.Tensor) -> torch.Tensor:
    """Elementwise: does x still hold the poison of its dtype?"""
    if x.dtype == torch.uint8:
        return x == POISON_U8
    return x.view(torch.int16) == POISON[x.dtype]


def check_untouched_rows(case: Case, cache_owner: torch.Tensor, entry: int, slots: torch.Tensor) -> None:
    """Rows no valid slot addresses (and the padding of strided rows) still hold the poison."""
    flat = cache_owner.reshape(-1, cache_owner.shape[-1])
    written = set(s for s in slots.tolist() if s >= 0)
    untouched = [r for r in range(flat.shape[0]) if r not in written]
    assert is_poison(flat[untouched]).all(), f"{case.id}: a row no valid slot names was written"
    assert is_poison(flat[:, entry:]).all(), f"{case.id}: padding past {entry} was written"
    assert (slots == -1).any() or case.tokens < 4, f"{case.id}: the case has no skipped slot"


# Values the E4M3 tests plant among the random inputs: rounding ties (normal and subnormal), the +-448 boundary
# and beyond, signed zeros, subnormals; INFINITE adds what only an E4M3 output may receive.
FINITE_SPECIALS = (0.0, -0.0, 1.0625, 1.1875, -1.0625, -1.1875, 2.0 ** -10, -(2.0 ** -10), 3 * 2.0 ** -10,
                   5 * 2.0 ** -10, 2.0 ** -9, 2.0 ** -7, 1.0625 * 2.0 ** -6, 0.01, 440.0, 448.0, -448.0, 456.0,
                   464.0, -464.0, 472.0, 480.0, 1000.0, -1e4, 6e4)
INFINITE_SPECIALS = (float("inf"), float("-inf"), float("nan"))


def plant(x: torch.Tensor, gen: torch.Generator, values: tuple[float, ...], rate: float = 0.04) -> torch.Tensor:
    """x (in place) with about `rate` of its elements replaced by `values`, at random places."""
    mask = torch.rand(x.shape, generator=gen) < rate
    picks = torch.tensor(values, dtype=torch.float32)[torch.randint(0, len(values), x.shape, generator=gen)]
    x[mask] = picks[mask].to(x.dtype)
    return x


def scalar(value: float) -> torch.Tensor:
    """A one-element fp32 device scalar (the ops' scale arguments)."""
    return torch.tensor([value], dtype=torch.float32)
