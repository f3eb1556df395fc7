#!/usr/bin/env bash
# The damage sweep (issue "hostile files"): builds a database with a collection and its index,
# a dictionary, documents and a raw keyspace; for every used page of the file and six offsets
# in it, flips 8 bytes in a copy, reads everything back through the API in a child process
# (opened with the default options, then again with DbOptions::verify_structure_on_open) and
# runs Db::check in another; prints how many copies read intact, as different data, as a typed
# error, a panic, a crash (signal) or a hang in each mode, and how many copies the check
# flagged, passed or crashed on; then runs the salvage export (in process: it never reads
# through LMDB) on every copy and classes what it returned. The tables in docs/storage.md
# come from it.
#
# usage: scripts/damage.sh [DIR]   (default: a temporary directory, removed afterwards)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-}
if [ -z "$dir" ]; then
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
fi
cargo build --release --locked --example damage
"${CARGO_TARGET_DIR:-target}/release/examples/damage" sweep "$dir"
"${CARGO_TARGET_DIR:-target}/release/examples/damage" salvage "$dir"
