#!/usr/bin/env bash
# Runs the libFuzzer harnesses of fuzz/ for longer than the test suite does: SECONDS each
# (default 600), all of them or those named (manifest rank_file journal index_cache reports).
# Builds the sanitize preset, makes the seeds, and keeps each corpus in
# build-sanitize/fuzz/corpus/NAME between runs. A crasher is left as crash-* in
# build-sanitize/fuzz/findings/NAME; fix it, then copy it to fuzz/regressions/NAME/ so that
# every run of the test suite tries it again.
# Usage: scripts/fuzz.sh [SECONDS [NAME...]]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(manifest rank_file journal index_cache reports)
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j"$(nproc)"
ctest --preset sanitize -R '^(make_fixtures|fuzz_seeds)$' >/dev/null
build=$PWD/build-sanitize
export TTRACE_HDF5_WORKER=$build/app/ttrace-hdf5-worker
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for name in "${names[@]}"; do
    findings=$build/fuzz/findings/$name
    mkdir -p "$findings"
    echo "== fuzz_$name, $seconds s"
    (cd "$findings" && "$OLDPWD/fuzz/run_fuzzer.sh" "$build/fuzz/fuzz_$name" \
        "$build/fuzz/corpus/$name" "$build/fuzz/seeds/$name" "$seconds") || status=1
done
exit $status
