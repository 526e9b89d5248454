#!/bin/sh
# One wheel build: in the build container as the unprivileged build user (--backend docker), or on the
# host with a private HOME and PYTHONUSERBASE (--backend local). The folders default to the container's:
#   KPATCH_SRC  (/kpatch/src)   the patched upstream source (read-only: it is built on a copy)
#   KPATCH_DEPS (/kpatch/deps)  wheels of the upstreams this one requires: installed, and pinned exactly
#   KPATCH_OUT  (/kpatch/out)   where the wheel must land
# Also from kpatch: KPATCH_VERSION (the version to build), KPATCH_BUILD_COMMAND (the upstream's documented
# build command), KPATCH_PIN_FILES (requirement files to pin in), KPATCH_PINS (name==version ...).
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

for file in ${KPATCH_PIN_FILES:-}; do
    [ -f "$file" ] || { echo "kpatch: pin file $file does not exist" >&2; exit 3; }
    for pin in ${KPATCH_PINS:-}; do
        python3 - "$file" "$pin" <<'PY'
import re, sys
path, pin = sys.argv[1], sys.argv[2]
name = pin.split("==")[0]
key = re.sub(r"[-_.]+", "-", name).lower()
lines, found = [], False
for line in open(path).read().splitlines():
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    if match and re.sub(r"[-_.]+", "-", match.group(1)).lower() == key:
        line, found = pin, True
    lines.append(line)
if not found:
    lines.append(pin)
open(path, "w").write("\n".join(lines) + "\n")
print(f"kpatch: {path}: {pin}")
PY
    done
done

export SETUPTOOLS_SCM_PRETEND_VERSION="$KPATCH_VERSION"
echo "kpatch: building version $KPATCH_VERSION: $KPATCH_BUILD_COMMAND"
sh -c "$KPATCH_BUILD_COMMAND"
ls "$KPATCH_OUT"/*.whl >/dev/null 2>&1 || { echo "kpatch: the build command wrote no wheel to $KPATCH_OUT" >&2; exit 4; }
