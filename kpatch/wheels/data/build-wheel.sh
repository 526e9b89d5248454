#!/bin/sh
# One wheel build: in the build container as the unprivileged build user (--backend docker), or on the
# host in a fresh venv of kpatch's own with a private HOME (--backend local). Shipped inside kpatch; a project can use
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
    # into the venv (local), or the build user's site: pip takes that when the system's is not writable
    python3 -m pip install --quiet --no-deps --no-index "$wheel"
done

# A compiler cache when kpatch gives the build one (KPATCH_SCCACHE=1; the cache is SCCACHE_DIR, a volume, or the
# remote storage SCCACHE_* names): the image's sccache goes on PATH, where the upstreams' setup.py look for it.
# Its server is this container's own, so its counts are this build's.
stats="$work/.kpatch-sccache.json"
cache=""
if [ "${KPATCH_SCCACHE:-}" = 1 ]; then
    if [ -x /opt/kpatch/sccache/bin/sccache ]; then PATH="/opt/kpatch/sccache/bin:$PATH"; export PATH; fi
    if command -v sccache >/dev/null 2>&1 && sccache --start-server >/dev/null 2>&1; then
        cache=sccache
    else
        echo "kpatch: no working sccache in the image: building without a compiler cache"
    fi
fi

export SETUPTOOLS_SCM_PRETEND_VERSION="$KPATCH_VERSION"
echo "kpatch: building version $KPATCH_VERSION: $KPATCH_BUILD_COMMAND"
sh -c "$KPATCH_BUILD_COMMAND"
ls "$KPATCH_OUT"/*.whl >/dev/null 2>&1 || { echo "kpatch: the build command wrote no wheel to $KPATCH_OUT" >&2; exit 4; }
if [ -n "$cache" ]; then
    sccache --show-stats --stats-format=json >"$stats" 2>/dev/null || rm -f "$stats"
    sccache --stop-server >/dev/null 2>&1 || :
fi

# What the build was built against, as the build's own python3 sees it once the requirements are installed,
# and what the compiler cache did.
python3 - "$KPATCH_OUT/kpatch-build-info.json" "$stats" <<'PY'
import importlib.metadata, json, os, sys
try:
    torch = importlib.metadata.version("torch")
except importlib.metadata.PackageNotFoundError:
    torch = None
cache = None
if os.path.isfile(sys.argv[2]):
    try:
        with open(sys.argv[2]) as raw:
            report = json.load(raw)
        counts = report["stats"]

        def total(key):
            return sum(counts.get(key, {}).get("counts", {}).values())

        cache = {"tool": "sccache", "hits": total("cache_hits"), "misses": total("cache_misses"),
                 "not_cached": counts.get("requests_not_cacheable", 0), "errors": total("cache_errors"),
                 "location": report.get("cache_location", "")}
        print(f"kpatch: sccache: {cache['hits']} hits, {cache['misses']} misses, {cache['not_cached']} not "
              f"cacheable, {cache['errors']} errors ({cache['location']})")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        print(f"kpatch: could not read sccache's counts: {err!r}")
with open(sys.argv[1], "w") as out:
    json.dump({"torch": torch, "compiler_cache": cache}, out)
print(f"kpatch: built against torch {torch or 'none'}")
PY
