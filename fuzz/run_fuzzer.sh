#!/usr/bin/env bash
# Runs one libFuzzer harness for SECONDS over CORPUS (kept between runs, new inputs added)
# and the read-only SEEDS; a crash, a leak, a timeout or undefined behaviour fails it and
# leaves the input as crash-*, leak-* or timeout-* in the working directory (copy it to
# fuzz/regressions/NAME/ to keep it as a regression input).
# Usage: run_fuzzer.sh FUZZER CORPUS SEEDS SECONDS [more libFuzzer flags]
set -euo pipefail
fuzzer=$1 corpus=$2 seeds=$3 seconds=$4
shift 4
mkdir -p "$corpus"
regressions="$(dirname "$0")/regressions/$(basename "$fuzzer" | sed 's/^fuzz_//')"
dirs=("$corpus" "$seeds")
[ -d "$regressions" ] && dirs+=("$regressions")
exec "$fuzzer" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=3072 -print_final_stats=1 \
    "$@" "${dirs[@]}"
