#!/usr/bin/env bash
# Bounded fuzz run of every target: scripts/fuzz.sh [seconds per target, default 60].
# Needs a nightly toolchain; installs cargo-fuzz from crates.io if it is missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-60}"
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
for target in validate json reader; do
    echo "== fuzz $target for ${seconds}s"
    cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536
done
echo "fuzz: no crash in ${seconds}s per target"
