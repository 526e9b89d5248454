set -eu
python3 -m pip install --quiet --user --no-deps --no-index --no-cache-dir /kpatch/wheels/*.whl || {
    echo "kpatch: the locked wheels did not install" >&2; exit 90; }
rm -rf /kpatch/test && cp -R /kpatch/src /kpatch/test && chmod -R u+w /kpatch/test && cd /kpatch/test
mkdir -p "$(dirname "$KPATCH_JUNIT")" && rm -f "$KPATCH_JUNIT"
echo "kpatch: running: $KPATCH_TEST_COMMAND"
exec sh -c "$KPATCH_TEST_COMMAND"
