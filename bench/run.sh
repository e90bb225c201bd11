#!/usr/bin/env bash
# Throughput and memory of gmsim (DESIGN §8). Not a test: prints figures.
# usage: bench/run.sh [BUILD_DIR] [EVENTS_MILLIONS]
set -euo pipefail
build=${1:-build}
millions=${2:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# about 2600 events per BERT-base iteration
iters=$((millions * 1000000 / 2596 + 1))
echo "== generating a ${millions}M-event BERT trace (uncompressed)"
"$build/gmsim" gen bert --iterations "$iters" --compress none -o "$tmp/big.h5"
ls -l "$tmp/big.h5"
echo "== in memory (engine + pytorch allocator + policy + metrics, no I/O)"
"$build/bench/gmbench" mem 5e6 pytorch
echo "== the predictive policy's period estimate (policies/period.h), at each width"
"$build/bench/gmbench" period 2000
echo "== end to end from HDF5 (the reader in its child process, the default)"
"$build/bench/gmbench" file "$tmp/big.h5" pytorch
echo "== end to end from HDF5, the reader in this process (what isolation costs)"
GMSIM_TRACE_INPROCESS=1 "$build/bench/gmbench" file "$tmp/big.h5" pytorch
echo "== the reader alone: isolated, then in-process"
"$build/bench/gmbench" read "$tmp/big.h5"
GMSIM_TRACE_INPROCESS=1 "$build/bench/gmbench" read "$tmp/big.h5"
echo "== opening a small trace (bert.h5, 21 k events): isolated, then in-process"
"$build/bench/gmbench" read traces/bert.h5
GMSIM_TRACE_INPROCESS=1 "$build/bench/gmbench" read traces/bert.h5
echo "== gmsim run, wall time and peak RSS (gmsim's own; the reader child is extra)"
/usr/bin/time -f "gmsim run: %e s wall, %M KiB peak RSS" "$build/gmsim" run -q "$tmp/big.h5"
GMSIM_TRACE_INPROCESS=1 /usr/bin/time -f "gmsim run (in-process reader): %e s wall, %M KiB peak RSS" \
    "$build/gmsim" run -q "$tmp/big.h5"
