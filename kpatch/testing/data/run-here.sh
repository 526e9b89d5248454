set -eu
python3 -m pip install --quiet --no-warn-script-location --disable-pip-version-check "$@" || {
    echo "kpatch: the locked wheels did not install" >&2; exit 90; }
cd "$KPATCH_TEST_DIR"
mkdir -p "$(dirname "$KPATCH_JUNIT")" && rm -f "$KPATCH_JUNIT"
echo "kpatch: running: $KPATCH_TEST_COMMAND"
exec sh -c "$KPATCH_TEST_COMMAND"
