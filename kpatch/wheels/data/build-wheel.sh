#!/bin/sh
# One wheel build: in the build container as the unprivileged build user (--backend docker), or on the
# host with a private HOME and PYTHONUSERBASE (--backend local). Shipped inside kpatch; a project can use
# its own (scripts/build-wheel.sh next to kpatch.toml). The folders default to the container's:
#   KPATCH_SRC  (/kpatch/src)   the patched upstream source, pins already rewritten (read-only: built on a copy)
#   KPATCH_DEPS (/kpatch/deps)  wheels of the upstreams this one requires: installed before the build
#   KPATCH_OUT  (/kpatch/out)   where the wheel must land; this script adds kpatch-build-info.json
# Also from kpatch: KPATCH_VERSION (the version to build), KPATCH_BUILD_COMMAND (the upstream's documented
# build command).
set -eu
src="${KPATCH_SRC:-/kpatch/src}"
deps="${KPATCH_DEPS:-/kpatch/deps}"
export KPATCH_OUT="${KPATCH_OUT:-/kpatch/out}"
work="$HOME/build"
rm -rf "$work"
cp -R "$src" "$work"
chmod -R u+w "$work"
cd "$work"

for wheel in "$deps"/*.whl; do
    [ -e "$wheel" ] || continue
    echo "kpatch: installing $(basename "$wheel")"
    python3 -m pip install --quiet --user --no-deps --no-index "$wheel"
done

export SETUPTOOLS_SCM_PRETEND_VERSION="$KPATCH_VERSION"
echo "kpatch: building version $KPATCH_VERSION: $KPATCH_BUILD_COMMAND"
sh -c "$KPATCH_BUILD_COMMAND"
ls "$KPATCH_OUT"/*.whl >/dev/null 2>&1 || { echo "kpatch: the build command wrote no wheel to $KPATCH_OUT" >&2; exit 4; }

# What the build was built against, as the build's own python3 sees it once the requirements are installed.
python3 - "$KPATCH_OUT/kpatch-build-info.json" <<'PY'
import importlib.metadata, json, sys
try:
    torch = importlib.metadata.version("torch")
except importlib.metadata.PackageNotFoundError:
    torch = None
with open(sys.argv[1], "w") as out:
    json.dump({"torch": torch}, out)
print(f"kpatch: built against torch {torch or 'none'}")
PY
