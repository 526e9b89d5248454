"""The released-pair table: `kpatch verify --wheel`'s contract over released vLLM versions x the kernels versions
they pin (requirements/xpu.txt in each vLLM sdist) and the newest kernels on the index; which pairs serve a model
on XPU, and which ops each lacks. Writes the table between the markers of a markdown file (docs/verify.md).

  python scripts/released_pairs.py                           # vLLM's newest sdist on the index, print the table
  python scripts/released_pairs.py --vllm 0.33.0 --write docs/verify.md
  python scripts/released_pairs.py --json                    # the rows, for the nightly's report

Downloads go to the kpatch cache (by sha256, checked against the index); nothing is written into the project but
the table. Exit 0 when the table was made (whatever it says), 2 on a bad option, 4 when the index fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from kpatch.errors import KpatchError, UsageError
from kpatch.project.places import default_cache_dir
from kpatch.verify.pairs import Released, rows, table, versions
from kpatch.verify.release import index_url

START, END = "<!-- released-pairs:start -->", "<!-- released-pairs:end -->"


def write(doc: Path, text: str) -> None:
    """Replace what stands between the markers of `doc` with `text`."""
    old = doc.read_text(encoding="utf-8")
    if START not in old or END not in old:
        raise UsageError(f"{doc}: no {START} ... {END} markers to write the table between")
    head, rest = old.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{START}\n{text}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--vllm", action="append", default=[], metavar="VERSION",
                        help="a vLLM version (repeat); default: the newest with an sdist on the index")
    parser.add_argument("--last", type=int, default=1, help="without --vllm: how many of the newest (default 1)")
    parser.add_argument("--app", default="vllm", help="the application's distribution (default vllm)")
    parser.add_argument("--kernels", default="vllm_xpu_kernels", help="the kernels' distribution")
    parser.add_argument("--requirements", default="requirements/xpu.txt",
                        help="the file in the app's sdist that pins the kernels (default requirements/xpu.txt)")
    parser.add_argument("--model", default="vllm/models/kimi_k3/", help="the model's package, as a path prefix")
    parser.add_argument("--model-name", default="Kimi-K3")
    parser.add_argument("--index", help="the simple index (default: pip's, else PyPI)")
    parser.add_argument("--cache-dir", type=Path, help="downloads (default: the kpatch cache's releases/)")
    parser.add_argument("--write", type=Path, metavar="MARKDOWN", help="write the table between its markers")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    try:
        index = args.index or index_url()
        cache = args.cache_dir or default_cache_dir() / "releases"
        app_versions = args.vllm or [str(v) for v in versions(args.app, index, sdist=True)[:args.last]]
        what = Released(args.app, args.kernels, args.requirements, args.model, args.model_name)
        found = rows(what, app_versions, index, cache, lambda line: print(line, file=sys.stderr))
    except KpatchError as err:
        print(f"error: {err}", file=sys.stderr)
        return int(err.exit_code)
    named = [f"--{k} {getattr(args, k)}" for k in ("app", "kernels") if getattr(args, k) != parser.get_default(k)]
    command = "python scripts/released_pairs.py " + " ".join([*named, *(f"--vllm {v}" for v in app_versions)])
    if args.write:
        command += f" --write {args.write.name if args.write.parent.name != 'docs' else 'docs/' + args.write.name}"
    if args.json:
        print(json.dumps([asdict(r) for r in found], indent=2))
    text = table(found, args.model_name, command.strip())
    if args.write:
        write(args.write, text)
    elif not args.json:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
