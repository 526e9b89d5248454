"""kpatch.toml `[verify] cuda-only`: accepted entries, and every mistake as one error line with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.config import CudaOnly, load
from kpatch.errors import ConfigError

HEAD = """version = 1

[[upstream]]
name = "kernels"
url = "https://example.invalid/k.git"
branch = "main"
base = "v1"
patches = "patches/kernels"

"""


def write(tmp_path: Path, verify: str) -> Path:
    path = tmp_path / "kpatch.toml"
    path.write_text(HEAD + verify)
    return path


def test_cuda_only_entries_by_op_pattern_and_by_module(tmp_path: Path) -> None:
    path = write(tmp_path, '[verify]\ncuda-only = [\n  { op = "cutlass_*", why = "CUTLASS" },\n'
                           '  { op = "_C_cache_ops.cp_gather_cache", why = "CUDA cache" },\n'
                           '  { module = "vllm.v1.attention.backends.rocm_octave_attn", why = "ROCm" },\n]\n')
    entries = load(path).cuda_only
    assert entries == (
        CudaOnly(op="cutlass_*", module=None, why="CUTLASS", line=12),
        CudaOnly(op="_C_cache_ops.cp_gather_cache", module=None, why="CUDA cache", line=13),
        CudaOnly(op=None, module="vllm.v1.attention.backends.rocm_octave_attn", why="ROCm", line=14))
    assert entries[0].matches("_C", "cutlass_scaled_mm", "vllm._custom_ops")
    assert not entries[1].matches("_C", "cp_gather_cache", "vllm._custom_ops")  # another library
    assert entries[2].matches("_C", "anything", "vllm.v1.attention.backends.rocm_octave_attn.sub")
    assert not entries[2].matches("_C", "anything", "vllm.v1.attention.backends.rocm_octave_attn_x")
    assert load(write(tmp_path, "")).cuda_only == ()


@pytest.mark.parametrize(("verify", "message"), [
    ('[verify]\ncuda-only = [\n  { op = "x" },\n]\n', ":12: 'cuda-only' entry 'x' needs a 'why'"),
    ('[verify]\ncuda-only = [\n  { op = "x", module = "m", why = "w" },\n]\n',
     ":12: a 'cuda-only' entry names exactly one of 'op' or 'module'"),
    ('[verify]\ncuda-only = [\n  { why = "w" },\n]\n', ":10: a 'cuda-only' entry names exactly one of 'op' or"),
    ('[verify]\ncuda-only = [\n  { op = "x", why = "" },\n]\n', ":12: 'cuda-only' 'why' must be a non-empty"),
    ('[verify]\ncuda-only = [\n  { op = "x", why = "w", because = "b" },\n]\n',
     ":12: unknown key 'because' in a 'cuda-only' entry"),
    ('[verify]\ncuda-only = [\n  { op = "x", why = "w" },\n  { op = "x", why = "v" },\n]\n',
     ":12: 'cuda-only' lists 'x' twice"),
    ('[verify]\ncuda-only = "x"\n', ":11: 'cuda-only' must be a list of"),
    ('[verify]\ncuda-only = ["x"]\n', ":11: every 'cuda-only' entry must be a"),
    ('[verify]\ncuda_only = []\n', ":11: unknown key 'cuda_only' in [verify]"),
    ('[verify]\ncuda-only = [\n  { op = 3, why = "w" },\n]\n', ":10: 'cuda-only' 'op' must be a non-empty string"),
])
def test_bad_cuda_only_is_one_error_with_file_and_line(tmp_path: Path, verify: str, message: str) -> None:
    path = write(tmp_path, verify)
    before = path.read_bytes()
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:") and message in str(caught.value)
    assert "\n" not in str(caught.value) and path.read_bytes() == before
