"""The precision of verify's XPU reachability model against findings labelled by hand: the contract of a kernels
tree and an application tree (both patched or both not), each labelled finding looked up among the findings it
reports. A label names its call by op and calling function ("function": "file::Class.method", as
tests/data/xpu_reach_labels.json) or by op and site ("site": "file:line", as a sample labelled from a release).

  python scripts/reach_precision.py tests/data/xpu_reach_labels.json KERNELS_TREE VLLM_TREE --cuda-only kpatch.toml
  python scripts/reach_precision.py /work/data/labels-v0.33.0.json vllm-xpu-kernels/ vllm-0.33.0/

Prints: reached calls still reported, unreached calls reported, and the precision (reported calls that are
reached / all reported labelled calls). Exit 0; 2 on a bad file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kpatch.config import load
from kpatch.errors import KpatchError
from kpatch.verify.contract import check, findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("labels", type=Path)
    parser.add_argument("kernels", type=Path, help="the kernels' source tree")
    parser.add_argument("app", type=Path, help="the application's source tree")
    parser.add_argument("--cuda-only", type=Path, metavar="KPATCH_TOML", help="take [verify] cuda-only from it")
    args = parser.parse_args(argv)
    try:
        labels = json.loads(args.labels.read_text(encoding="utf-8"))["findings"]
        cuda_only = load(args.cuda_only).cuda_only if args.cuda_only else ()
    except (OSError, ValueError, KeyError, KpatchError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    found = findings(check(args.kernels.resolve(), args.app.resolve(), cuda_only))
    by_site = {(f.op, str(f.site)) for f in found}
    by_function = {(f.op, f.kind == "unbound", f.function) for f in found}

    def reported(label: dict[str, str]) -> bool:
        if "site" in label:
            return (label["op"], label["site"]) in by_site
        return (label["op"], label.get("kind") == "unbound", label["function"]) in by_function

    reached = [x for x in labels if x["verdict"] == "reached"]
    others = [x for x in labels if x["verdict"] == "not-reached"]
    kept = sum(reported(x) for x in reached)
    false = sum(reported(x) for x in others)
    print(f"{args.labels.name}: {len(reached)} reached on XPU, {len(others)} not; still reported: "
          f"{kept}/{len(reached)} reached, {false}/{len(others)} not reached; precision {kept}/{kept + false} = "
          f"{100 * kept / max(1, kept + false):.0f}%")
    for x in reached:
        if not reported(x):
            print(f"  reached but not reported: {x['op']} at {x.get('site') or x['function']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
