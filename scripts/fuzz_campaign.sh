#!/usr/bin/env bash
# The long fuzz campaign behind the README's execution counts:
#   scripts/fuzz_campaign.sh [executions per target, default 10000000] [target...]
#
# Each target runs for exactly that many executions (libFuzzer's -runs) from an empty corpus kept
# under fuzz/campaign/<target>, and the script prints one line per target: executions, seconds
# and rate. It builds without AddressSanitizer (`-s none`): Rust's own bounds checks still turn
# every out-of-range read into a panic, which libFuzzer reports as a crash, and the run is two to
# three times faster; `scripts/fuzz.sh` (what CI runs) keeps the sanitizer. A crash stops the
# script with a non-zero status and leaves the crashing input under fuzz/artifacts/<target>.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
runs="${1:-10000000}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(validate json reader trusted query record)
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "notice: no nightly toolchain; skipping the fuzz campaign"
    exit 0
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "notice: cargo-fuzz is not installed; skipping the fuzz campaign"
    exit 0
fi
cargo +nightly fuzz build -s none
for target in "${targets[@]}"; do
    mkdir -p "campaign/$target"
    start=$(date +%s)
    cargo +nightly fuzz run -s none "$target" "campaign/$target" -- \
        -runs="$runs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 2>"campaign/$target.log"
    seconds=$(( $(date +%s) - start ))
    done_runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "campaign/$target.log" | grep -o '[0-9]*$')
    echo "$target: ${done_runs} executions without a crash in ${seconds} s ($(( done_runs / (seconds > 0 ? seconds : 1) ))/s)"
done
