#!/usr/bin/env bash
# snap_trace.sh GMSIM ITERATIONS OUT.h5 - a trace shaped like a PyTorch
# memory snapshot, large enough to time: a synthetic BERT of ITERATIONS
# iterations, simulated and written as a snapshot (gmsim export
# --memory-viz), its first 8000 trace entries dropped as a snapshot's ring
# buffer drops them (so the parameters and optimizer state made in the
# first iteration are there before the first event and live to the end,
# as in a real snapshot), then imported (gmsim import, which rebuilds that
# initial state). Not a test: a benchmark input (bench/README,
# "Eighteenth round"). Needs python3 (its pickle module) for the cut.
#
#   bash bench/snap_trace.sh build/gmsim 400 /tmp/snap400.h5   # ~1 M events
set -euo pipefail
if [ $# -ne 3 ]; then
    sed -n '2,/^set/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
g=$1 iters=$2 out=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$g" gen bert --iterations "$iters" --compress none -o "$tmp/gen.h5" >/dev/null
"$g" export --memory-viz "$tmp/full.pickle" --capacity 80GiB "$tmp/gen.h5" >/dev/null
python3 - "$tmp/full.pickle" "$tmp/cut.pickle" <<'PY'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
d["device_traces"][0] = d["device_traces"][0][8000:]
pickle.dump(d, open(sys.argv[2], "wb"), protocol=4)
PY
"$g" import "$tmp/cut.pickle" -o "$out"
