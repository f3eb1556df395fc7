#!/usr/bin/env bash
# Bounded fuzz run of every target: scripts/fuzz.sh [seconds per target, default 60].
#
# Needs a nightly toolchain and cargo-fuzz; installs cargo-fuzz from crates.io if it is missing.
# When neither can be had, says so and exits 0 (the step is skipped, not passed). A crash, or a
# target that fails to build, exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-60}"
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "notice: no nightly toolchain; skipping the fuzz run"
    exit 0
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    if ! cargo install cargo-fuzz --locked >/dev/null 2>&1; then
        echo "notice: cargo-fuzz is not installed and could not be installed; skipping the fuzz run"
        exit 0
    fi
fi
targets=(validate json reader trusted query record)
cargo +nightly fuzz build
for target in "${targets[@]}"; do
    echo "== fuzz $target for ${seconds}s"
    cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536
done
echo "fuzz: no crash in ${seconds}s per target"
