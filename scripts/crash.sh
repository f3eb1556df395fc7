#!/usr/bin/env bash
# Runs the crash tests (crates/tessera/tests/crash.rs) with N kills per test and durability
# level (default 1000), in release mode: the store, documents and whole-product children are
# killed with SIGKILL at random moments, and after each kill every acknowledged commit must be
# present, no transaction partly visible, and Db::check clean.
set -euo pipefail
cd "$(dirname "$0")/.."
iterations="${1:-1000}"
echo "crash tests: ${iterations} kills per test and durability level"
time TESSERA_CRASH_ITERATIONS="$iterations" cargo test --release --locked -p tessera --test crash -- --test-threads=1
