"""Runs in a child Python (`python -P <this file>`, in an empty folder): import torch and the kernels'
extensions, then ask the dispatcher about each op. Reads a JSON request on stdin, writes a JSON answer on stdout.

kpatch's own process never imports torch: this module is the only place that does, and only in the child.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from typing import Any

KEYS = ("XPU", "CUDA", "CPU", "Meta", "CompositeExplicitAutograd", "CompositeImplicitAutograd")


def probe(request: dict[str, Any]) -> dict[str, Any]:
    """{"modules": [...], "ops": ["ns::op", ...], "key": "XPU"} -> imports, torch version, and per op its kernels."""
    # imported where used: torch exists only in the child Python this runs in
    import torch

    before = set(torch._C._dispatch_get_all_op_names())
    imports: dict[str, str | None] = {}
    for name in request["modules"]:
        try:
            importlib.import_module(name)
            imports[name] = None
        except BaseException as err:  # noqa: BLE001  # a broken extension raises anything (ImportError, OSError, RuntimeError)
            imports[name] = f"{type(err).__name__}: {err}".splitlines()[0]
    added = set(torch._C._dispatch_get_all_op_names()) - before
    key = request.get("key", "XPU")
    ops = {}
    for qualname in request["ops"]:
        schemas = torch._C._jit_get_schemas_for_operator(qualname)
        if not schemas:
            ops[qualname] = {"defined": False, "keys": [], "xpu": False, "computed": False, "schema": None}
            continue
        keys = [k for k in KEYS if torch._C._dispatch_has_kernel_for_dispatch_key(qualname, k)]
        ops[qualname] = {
            "defined": True, "keys": keys,
            "xpu": torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key),
            # a composite kernel serves every backend: the dispatcher's computed table says so
            "computed": torch._C._dispatch_has_computed_kernel_for_dispatch_key(qualname, key),
            "schema": str(next((s for s in schemas if not s.overload_name), schemas[0])),
        }
    return {"torch": torch.__version__, "imports": imports, "ops": ops,
            "namespaces": sorted({name.split("::", 1)[0] for name in added})}


def main() -> int:
    try:
        answer = probe(json.loads(sys.stdin.read()))
    except BaseException:  # noqa: BLE001  # the child reports any failure as a traceback and status 3
        sys.stderr.write(traceback.format_exc())
        return 3
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
