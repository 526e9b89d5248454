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
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from kpatch.errors import KpatchError, UsageError
from kpatch.project.workspace import default_cache_dir
from kpatch.verify.contract import findings
from kpatch.verify.release import Release, index_files, index_url, open_release
from kpatch.verify.released import check_released

START, END = "<!-- released-pairs:start -->", "<!-- released-pairs:end -->"


@dataclass(frozen=True)
class Row:
    app: str  # "vllm 0.33.0"
    kernels: str  # "vllm_xpu_kernels 0.1.15.4"
    pinned: bool  # the app's requirements name exactly this kernels version
    serves_model: bool  # no finding at a call site under the model's package
    model_lacks: tuple[str, ...]  # ops the model calls on XPU that the kernels lack or declare differently
    lacks: int  # every op the app reaches on XPU that the kernels lack (not defined, or no XPU kernel)
    differ: int  # ops whose registered schema breaks the app's declaration or calls
    keys_unread: int  # called ops whose dispatch keys the binary does not say


def pinned_kernels(root: Path, kernels: str, requirements: str) -> str | None:
    """The kernels version the app's requirements file pins exactly (None: none, or not exactly)."""
    path = root / requirements
    if not path.is_file():
        return None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        text = line.split("#", 1)[0].strip()
        if not text or text.startswith("-"):
            continue
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if canonicalize_name(req.name) == canonicalize_name(kernels) and len(specs) == 1 \
                and specs[0].operator == "==":
            return specs[0].version
    return None


def versions(project: str, index: str, *, sdist: bool) -> list[Version]:
    """The project's released versions on the index (with an sdist, or with a wheel), newest first."""
    out: set[Version] = set()
    for f in index_files(project, index):
        try:
            if sdist and f.filename.endswith((".tar.gz", ".zip")):
                out.add(parse_sdist_filename(f.filename)[1])
            elif not sdist and f.filename.endswith(".whl"):
                out.add(parse_wheel_filename(f.filename)[1])
        except (ValueError, InvalidVersion):
            continue
    return sorted((v for v in out if not v.is_prerelease), reverse=True)


def row(half_a: Release, half_k: Release, pinned: bool, model: str) -> Row:
    result = check_released(half_k, half_a)
    report = result.contracts[0].report
    assert report is not None  # check_released always reads the contract
    found = findings(report)
    in_model = sorted({f.op.split(".", 1)[1] for f in found if f.site.file.startswith(model)}
                      | {s.op.split(".", 1)[1] for s in result.contracts[0].seen if s.site.startswith(model)})
    return Row(f"{half_a.name} {half_a.version}", f"{half_k.name} {half_k.version}", pinned, not in_model,
               tuple(in_model), len({f.op for f in found if f.kind != "unbound"}),
               len({f"{m.namespace}.{m.op}" for m in report.mismatches if m.breaking}
                   | {f.op for f in found if f.kind == "unbound"}),
               len(report.keys_unread))


def table(rows: list[Row], model_name: str, command: str) -> str:
    lines = [f"Made by `{command}` (each pair read with `kpatch verify --wheel`).", "",
             f"| vLLM | kernels | pinned by vLLM | serves {model_name} on XPU | {model_name} ops lacking or differing "
             "| ops vLLM reaches that the kernels lack | schemas that differ | dispatch keys unread |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ops = ", ".join(f"`{op}`" for op in r.model_lacks) or "none"
        lines.append(f"| {r.app} | {r.kernels} | {'yes' if r.pinned else 'no (newest)'} | "
                     f"{'yes' if r.serves_model else '**no**'} | {ops} | {r.lacks} | {r.differ} | {r.keys_unread} |")
    return "\n".join(lines) + "\n"


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
        newest = versions(args.kernels, index, sdist=False)
        if not app_versions or not newest:
            raise UsageError(f"{index}: no released {args.app if not app_versions else args.kernels} found")
        rows = []
        with tempfile.TemporaryDirectory(prefix="kpatch-pairs-") as tmp:
            kernels: dict[str, Release] = {}  # each kernels release unpacked once
            for version in app_versions:
                print(f"opening {args.app}=={version}", file=sys.stderr)
                app = open_release(f"{args.app}=={version}", Path(tmp) / "app", cache=cache, index=index)
                pin = pinned_kernels(app.root, args.kernels, args.requirements)
                for kv in dict.fromkeys([*([pin] if pin else []), str(newest[0])]):
                    if kv not in kernels:
                        print(f"opening {args.kernels}=={kv}", file=sys.stderr)
                        kernels[kv] = open_release(f"{args.kernels}=={kv}", Path(tmp) / "kernels", cache=cache,
                                                    index=index)
                    print(f"checking {args.app} {version} x {args.kernels} {kv}", file=sys.stderr)
                    rows.append(row(app, kernels[kv], kv == pin, args.model))
    except KpatchError as err:
        print(f"error: {err}", file=sys.stderr)
        return int(err.exit_code)
    named = [f"--{k} {getattr(args, k)}" for k in ("app", "kernels") if getattr(args, k) != parser.get_default(k)]
    command = "python scripts/released_pairs.py " + " ".join([*named, *(f"--vllm {v}" for v in app_versions)])
    if args.write:
        command += f" --write {args.write.name if args.write.parent.name != 'docs' else 'docs/' + args.write.name}"
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    text = table(rows, args.model_name, command.strip())
    if args.write:
        write(args.write, text)
    elif not args.json:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
