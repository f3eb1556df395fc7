#!/usr/bin/env bash
# Runs tessera-value's tests under Miri (a subset: the property tests are too slow there).
# Installs the nightly Miri component when it can; prints a notice and exits 0 when it cannot.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    if ! rustup toolchain install nightly --profile minimal --component miri rust-src >/dev/null 2>&1 \
        && ! rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1; then
        echo "notice: no nightly toolchain with Miri could be installed; skipping the Miri run"
        exit 0
    fi
fi
if ! cargo +nightly miri setup >/dev/null 2>&1; then
    echo "notice: 'cargo miri setup' failed (rust-src missing?); skipping the Miri run"
    exit 0
fi

set -e
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
# Unit tests, the hand-built malformed documents, and serde/API tests: every unsafe block
# (UTF-8 of validated strings, JSON keys, the SIMD string scan) is reached from these.
cargo +nightly miri test -p tessera-value --lib
cargo +nightly miri test -p tessera-value --test validation -- --skip bit_flips --skip shared_subtree_chain --skip a_sorted_key_index
cargo +nightly miri test -p tessera-value --test serde_and_api -- --skip wider_than --skip nesting_limit --skip repeated_strings
cargo +nightly miri test -p tessera-value --test json_conformance -- --skip depth_limit
# Packed numeric arrays: the in-place `&[f64]`/`&[i32]` views (bytemuck's checked casts) on
# aligned and misaligned buffers, and the number-run parser.
cargo +nightly miri test -p tessera-value --test packed
echo "miri: ok"
