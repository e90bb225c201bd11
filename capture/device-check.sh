#!/usr/bin/env bash
# device-check.sh [GM_BIN] - gmcapture on a real GPU (PyTorch + transformers).
#
# GM_BIN (argument or environment): a folder holding gmcapture, libgmcapture.so
# and gmsim as built on the build machine, plus the shared libraries they need
# that the GPU machine lacks (HDF5 and its dependencies, libcupti.so.13), either
# in GM_BIN itself or in GM_BIN/lib. Nothing is built or downloaded here.
#
# It runs capture/train_small_bert.py (a small BERT built from a BertConfig,
# random weights) four ways, REPS times each (default 2, the fastest counts):
#   base      no capture                    | capt      gmcapture
#   base-pt   no capture, no caching         | capt-pt   gmcapture --torch-per-tensor
# and prints one table: events and markers captured, dropped records, the
# timed training loop with and without capture (overhead %), whole-process wall
# time, then `gmsim info` and `gmsim run` on each trace. Logs, traces and the
# table go to $OUT/device-check (OUT defaults to a new temporary folder).
#
# Environment: PYTHON (default python3), STEPS (default 30), REPS (default 2),
# RUN_TIMEOUT seconds per run (default 300).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GM_BIN=${1:-${GM_BIN:-}}
if [ -z "$GM_BIN" ] || [ ! -x "$GM_BIN/gmcapture" ]; then
    echo "usage: device-check.sh GM_BIN   (GM_BIN holds gmcapture, libgmcapture.so, gmsim)" >&2
    exit 2
fi
GM_BIN=$(cd "$GM_BIN" && pwd)
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-30}
REPS=${REPS:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
OUT=${OUT:-$(mktemp -d)}
log=$OUT/device-check
mkdir -p "$log"
train=$here/train_small_bert.py

# The carried libraries: the injection library's HDF5 dependencies are found
# through LD_LIBRARY_PATH (RUNPATH covers direct dependencies only). Every run,
# the baselines included, gets the same environment so the timings compare.
libs=$GM_BIN
[ -d "$GM_BIN/lib" ] && libs=$GM_BIN/lib:$GM_BIN
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GMCAPTURE_LIB=$GM_BIN/libgmcapture.so
[ -f "$GM_BIN/lib/libcupti.so.13" ] && export GMCAPTURE_CUPTI_LIB=$GM_BIN/lib/libcupti.so.13
[ -f "$GM_BIN/libcupti.so.13" ] && export GMCAPTURE_CUPTI_LIB=$GM_BIN/libcupti.so.13

{
    echo "== machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
    "$PYTHON" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' 2>&1
    echo "GM_BIN=$GM_BIN"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    ldd "$GM_BIN/libgmcapture.so" 2>&1
} >"$log/env.txt"
cat "$log/env.txt"

now() { date +%s.%N; }

# run NAME [gmcapture options --] : one timed run; writes $log/NAME.{out,err,wall}
run_one() {
    local name=$1
    shift
    local t0 t1 rc
    t0=$(now)
    timeout "$RUN_TIMEOUT" "$@" "$PYTHON" "$train" --steps "$STEPS" \
        >"$log/$name.out" 2>"$log/$name.err"
    rc=$?
    t1=$(now)
    echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >"$log/$name.wall"
    echo "$rc" >"$log/$name.rc"
    return "$rc"
}

field() { # FILE KEY: a number from the RESULT json line
    grep '^RESULT ' "$1" 2>/dev/null | tail -1 | sed 's/^RESULT //' |
        "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['$2'])" 2>/dev/null || echo "?"
}

best() { # NAME KEY: the smallest value over the repetitions
    local name=$1 key=$2 v vals=""
    for r in $(seq 1 "$REPS"); do
        if [ "$key" = wall ]; then v=$(cat "$log/$name-$r.wall" 2>/dev/null); else v=$(field "$log/$name-$r.out" "$key"); fi
        [ -n "$v" ] && [ "$v" != "?" ] && vals="$vals $v"
    done
    if [ -z "$vals" ]; then echo "?"; else echo "$vals" | tr ' ' '\n' | sed '/^$/d' | sort -g | head -1; fi
}

pct() { # BASE NEW
    awk -v b="$1" -v n="$2" 'BEGIN { if (b == "?" || n == "?" || b <= 0) print "?"; else printf "%+.1f%%", 100 * (n - b) / b }'
}

nvtx_opt=()
for r in $(seq 1 "$REPS"); do
    echo "== repetition $r/$REPS"
    run_one "base-$r" env || echo "base run failed (rc $(cat "$log/base-$r.rc")): see $log/base-$r.err"
    run_one "base-pt-$r" env PYTORCH_NO_CUDA_MEMORY_CACHING=1 ||
        echo "base-pt run failed: see $log/base-pt-$r.err"
    if ! run_one "capt-$r" "$GM_BIN/gmcapture" "${nvtx_opt[@]}" -o "$log/capt-$r.h5" --; then
        echo "capture run failed (rc $(cat "$log/capt-$r.rc")):"
        tail -5 "$log/capt-$r.err"
        if [ ${#nvtx_opt[@]} -eq 0 ] && grep -q '^RESULT' "$log/base-$r.out"; then
            # CUPTI 13.0's NVTX injection has crashed in some programs (NVIDIA/NVTX#125)
            echo "retrying the capture runs with --no-nvtx"
            nvtx_opt=(--no-nvtx)
            run_one "capt-$r" "$GM_BIN/gmcapture" "${nvtx_opt[@]}" -o "$log/capt-$r.h5" -- ||
                tail -5 "$log/capt-$r.err"
        fi
    fi
    run_one "capt-pt-$r" "$GM_BIN/gmcapture" "${nvtx_opt[@]}" --torch-per-tensor \
        -o "$log/capt-pt-$r.h5" -- || { echo "per-tensor capture failed:"; tail -5 "$log/capt-pt-$r.err"; }
done

captured() { # NAME WHAT: from the library's "wrote ...: N events, M markers, ..." line
    local line
    line=$(grep -h "gmcapture\[[0-9]*\]: wrote " "$log/$1-1.err" 2>/dev/null | tail -1)
    case $2 in
    events) echo "$line" | sed -n 's/.*: \([0-9]*\) events.*/\1/p' ;;
    markers) echo "$line" | sed -n 's/.*, \([0-9]*\) markers.*/\1/p' ;;
    dropped) echo "$line" | sed -n 's/.*, \([0-9]*\) dropped.*/\1/p' ;;
    esac
}

table=$log/table.txt
{
    [ ${#nvtx_opt[@]} -gt 0 ] && echo "note: captured with --no-nvtx (NVTX capture crashed; see logs)"
    printf "%-22s %9s %8s %8s %10s %10s %9s %9s %9s %9s\n" mode events markers dropped \
        loop_base loop_capt overhead wall_base wall_capt wall_ovh
    for pair in "caching:base:capt" "per-tensor:base-pt:capt-pt"; do
        IFS=: read -r label b c <<<"$pair"
        lb=$(best "$b" loop_s)
        lc=$(best "$c" loop_s)
        wb=$(best "$b" wall)
        wc=$(best "$c" wall)
        ev=$(captured "$c" events)
        mk=$(captured "$c" markers)
        dr=$(captured "$c" dropped)
        printf "%-22s %9s %8s %8s %10s %10s %9s %9s %9s %9s\n" "$label" "${ev:-none}" "${mk:-?}" \
            "${dr:-?}" "$lb" "$lc" "$(pct "$lb" "$lc")" "$wb" "$wc" "$(pct "$wb" "$wc")"
    done
    echo "(loop = timed training steps, seconds, best of $REPS; wall = whole process incl. imports)"
    echo "peak reserved (PyTorch, caching): $(field "$log/base-1.out" max_reserved_bytes) B without capture," \
        "$(field "$log/capt-1.out" max_reserved_bytes) B with"
} >"$table"

for c in capt capt-pt; do
    t=$log/$c-1.h5
    {
        echo
        echo "== gmsim info $c-1.h5"
        if [ -f "$t" ]; then
            "$GM_BIN/gmsim" info "$t" 2>&1 | head -40
            echo "== gmsim run --policy pytorch $c-1.h5"
            "$GM_BIN/gmsim" run --policy pytorch --json "$log/$c-1.run.json" "$t" 2>&1 | head -40
        else
            echo "(no trace: see $log/$c-1.err)"
        fi
    } >>"$table"
done

echo
cat "$table"
echo
echo "logs and traces: $log"
