#!/usr/bin/env bash
# device-check.sh [BUNDLE] - check the simulator against a real GPU, in a few
# minutes, on a machine that has the NVIDIA driver but not HDF5/GSL/jansson.
#
# BUNDLE is a folder made here by `cmake --build BUILD --target gmreplay-bundle`
# (BUNDLE/bin: gmsim, gmreplay; BUNDLE/lib: their shared libraries). Nothing
# is built on the GPU machine. Run it from the repository root (the traces are
# read from traces/ and tests/data/). Logs and every JSON/HTML file go to
# $OUT (default ./device-check-out).
#
#  1. gmreplay --calibrate                  -> profile.json (latency, context)
#  2. for traces/bert.h5 and one imported PyTorch snapshot (tests/data/*.h5,
#     $GM_SNAPSHOT, or imported here from a tests/data/*.pickle with
#     `gmsim import` when that command exists; otherwise skipped, said so):
#       - at the full card (its memory less a 256 MiB margin, so run-to-run
#         jitter of the context size never leaves the ballast short), and
#       - at a capacity that makes the baseline (pytorch) OOM: `gmsim fit`'s
#         smallest capacity without OOM (else the full-card peak reserved plus
#         the context) less 10 % of the peak reserved, or less if the initial
#         state of a snapshot would not fit there (see oom_capacity),
#     `gmsim run --json` (prediction, with the profile) and `gmreplay` (same
#     settings), then `gmsim validate`. bert.h5 also runs with
#     expandable_segments:True at its own OOM capacity (the VMM path).
#  3. a table of every case; exit 0 when every validation passed.
#
# Environment: OUT, GM_SNAPSHOT (a .h5 to use as the imported snapshot),
# GM_CHECK_TIMEOUT (seconds per command, default 300).
set -u

here=$(pwd)
bundle=${1:-}
if [ -z "$bundle" ]; then
    for b in build/replay/bundle build-*/replay/bundle; do
        [ -x "$b/bin/gmreplay" ] && bundle=$b && break
    done
fi
if [ -z "$bundle" ] || [ ! -x "$bundle/bin/gmreplay" ] || [ ! -x "$bundle/bin/gmsim" ]; then
    echo "device-check: no bundle (BUNDLE/bin/gmsim and gmreplay); make one with" >&2
    echo "  cmake --build BUILD --target gmreplay-bundle   and pass BUILD/replay/bundle" >&2
    exit 2
fi
bundle=$(cd "$bundle" && pwd)
OUT=${OUT:-$here/device-check-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gmsim=$bundle/bin/gmsim
gmreplay=$bundle/bin/gmreplay
tmo=${GM_CHECK_TIMEOUT:-300}
log=$OUT/log.txt
: >"$log"
summary=$OUT/summary.txt
: >"$summary"
fails=0

say() { echo "$*" | tee -a "$log"; }

# run NAME CMD...: run with a timeout, stdout+stderr to $OUT/NAME.log (and the log)
run() {
    local name=$1
    shift
    echo "\$ $*" >>"$log"
    if command -v timeout >/dev/null; then
        timeout "$tmo" "$@" >"$OUT/$name.log" 2>&1
    else
        "$@" >"$OUT/$name.log" 2>&1
    fi
    local rc=$?
    cat "$OUT/$name.log" >>"$log"
    echo "(exit $rc)" >>"$log"
    # gmsim run exits 3 when it predicts an OOM: a prediction, not a failure
    [ "$rc" -eq 3 ] && [ "${2:-}" = run ] && rc=0
    return $rc
}

# first/last integer value of "KEY": in a JSON file (no jq or python needed:
# gmsim writes one key per line; the device-level value comes first)
first_num() { grep -o "\"$2\": *[0-9]*" "$1" | head -1 | grep -o '[0-9]*$'; }
last_num() { grep -o "\"$2\": *[0-9]*" "$1" | tail -1 | grep -o '[0-9]*$'; }
gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }

say "== gmsim device check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "bundle: $bundle ($(head -1 "$bundle/BUNDLE.txt" 2>/dev/null))"
"$gmsim" --version >>"$log" 2>&1 || { say "device-check: gmsim does not start (see $log)"; exit 1; }
if command -v nvidia-smi >/dev/null; then
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
    say "$(nvidia-smi -L 2>&1 | head -4)"
    say "$(nvidia-smi --query-gpu=driver_version,memory.total,memory.used --format=csv 2>&1)"
fi

# ---- 1. calibrate ----
say ""
say "== 1. gmreplay --calibrate"
if ! run calibrate "$gmreplay" --calibrate -o "$OUT/profile.json"; then
    say "device-check: calibration failed:"
    tail -5 "$OUT/calibrate.log" | tee -a "$log"
    exit 1
fi
cat "$OUT/calibrate.log"
profile=$OUT/profile.json
total=$(first_num "$profile" total_bytes)
ctx=$(first_num "$profile" context_overhead_bytes)
full=$((total - 256 * 1024 * 1024))
full=$((full / 2097152 * 2097152))
say "card: $(gib "$total"), context $(gib "$ctx"); full-card case at $(gib "$full")"

# ---- 2. traces ----
traces=("traces/bert.h5")
snapshot=${GM_SNAPSHOT:-}
if [ -z "$snapshot" ]; then
    for f in tests/data/*.h5 ../shared/traces/*/*.h5; do
        [ -f "$f" ] && snapshot=$f && break
    done
fi
if [ -z "$snapshot" ] && "$gmsim" import --help >/dev/null 2>&1; then
    for p in tests/data/gpt-medium-ctx128-train.pickle tests/data/*.pickle; do
        [ -f "$p" ] || continue
        if run import "$gmsim" import "$p" -o "$OUT/snapshot.h5"; then
            snapshot=$OUT/snapshot.h5
            say "imported $p -> $snapshot"
            break
        fi
    done
fi
if [ -n "$snapshot" ]; then
    traces+=("$snapshot")
else
    say "no imported snapshot trace (no tests/data/*.h5, no GM_SNAPSHOT, and 'gmsim import'"
    say "is not available or failed): skipping the snapshot cases"
fi

printf '%-34s %-11s %-19s %-19s %-23s %s\n' "case" "capacity" "OOMs pred/meas" \
    "first OOM event" "peak reserved p/m" "result" >>"$summary"

# check NAME TRACE CAPACITY [gmsim/gmreplay options...]
check() {
    local name=$1 trace=$2 cap=$3
    shift 3
    local pred=$OUT/$name.pred.json meas=$OUT/$name.meas.json verdict
    say ""
    say "== $name: $trace at $(gib "$cap") $*"
    if ! run "$name.run" "$gmsim" run -q --device-profile "$profile" --capacity "$cap" "$@" \
        --json "$pred" "$trace"; then
        say "gmsim run failed: $(tail -2 "$OUT/$name.run.log")"
        verdict="ERROR (gmsim run)"
    elif ! run "$name.replay" "$gmreplay" --device-profile "$profile" --capacity "$cap" "$@" \
        "$trace" -o "$meas"; then
        say "gmreplay failed: $(tail -2 "$OUT/$name.replay.log")"
        verdict="ERROR (gmreplay)"
    else
        cat "$OUT/$name.replay.log"
        run "$name.validate" "$gmsim" validate "$pred" "$meas" --json "$OUT/$name.validate.json" \
            --html "$OUT/$name.validate.html"
        cat "$OUT/$name.validate.log"
        verdict=$(grep -o '^validate: .*' "$OUT/$name.validate.log" | head -1)
        verdict=${verdict#validate: }
    fi
    case "$verdict" in PASS*) ;; *) fails=$((fails + 1)) ;; esac
    local po mo pe me pr mr
    po=$(first_num "$pred" oom_count 2>/dev/null)
    mo=$(first_num "$meas" oom_count 2>/dev/null)
    pe=$(first_num "$pred" event_index 2>/dev/null)
    me=$(first_num "$meas" event_index 2>/dev/null)
    pr=$(first_num "$pred" peak_reserved_bytes 2>/dev/null)
    mr=$(first_num "$meas" peak_reserved_bytes 2>/dev/null)
    pr=${pr:+$(gib "$pr")}
    mr=${mr:+$(gib "$mr")}
    printf '%-34s %-11s %-19s %-19s %-23s %s\n' "$name" "$(gib "$cap")" "${po:--}/${mo:--}" \
        "${pe:--}/${me:--}" "${pr:--} / ${mr:--}" "$verdict" >>"$summary"
}

# oom_capacity NAME TRACE PRED_FULL [options]: a capacity at which the
# baseline (pytorch) OOMs, well inside the run: from `gmsim fit` when there is
# one (the smallest capacity without OOM, F), else from the full-card peak
# reserved. It starts 10 % of the peak reserved below F and halves the step
# while the prediction does not run (a snapshot's initial state must fit) or
# has no OOM, down to F - 2 MiB.
oom_capacity() {
    local name=$1 trace=$2 pred_full=$3 fit="" peak=""
    shift 3
    if run "$name.fit" "$gmsim" fit -q --policies pytorch --device-profile "$profile" "$@" \
        --json "$OUT/$name.fit.json" "$trace"; then
        fit=$(last_num "$OUT/$name.fit.json" capacity_bytes)
        peak=$(last_num "$OUT/$name.fit.json" peak_reserved_bytes)
        echo "gmsim fit: fits at $fit bytes, peak reserved $peak" >>"$log"
    elif [ -f "$pred_full" ]; then
        peak=$(first_num "$pred_full" peak_reserved_bytes)
        [ -n "$peak" ] && fit=$((peak + ctx))
        echo "no gmsim fit: from the full-card peak reserved ($peak) + context" >>"$log"
    fi
    [ -n "$fit" ] && [ -n "$peak" ] || return 0
    local step=$((peak / 10)) cap
    while [ "$step" -ge 2097152 ]; do
        cap=$(((fit - step) / 2097152 * 2097152))
        if run "$name.probe" "$gmsim" run -q --device-profile "$profile" --capacity "$cap" "$@" \
            --json "$OUT/$name.probe.json" "$trace" &&
            [ "$(first_num "$OUT/$name.probe.json" oom_count)" != 0 ]; then
            echo "$cap"
            return 0
        fi
        step=$((step / 2))
    done
    cap=$(((fit - 2097152) / 2097152 * 2097152))
    if run "$name.probe" "$gmsim" run -q --device-profile "$profile" --capacity "$cap" "$@" \
        --json "$OUT/$name.probe.json" "$trace"; then
        echo "$cap"
    else # e.g. a snapshot whose peak is its initial state
        echo "none"
    fi
}

for t in "${traces[@]}"; do
    base=$(basename "$t" .h5)
    if [ ! -f "$t" ]; then
        say "missing trace $t: skipped"
        fails=$((fails + 1))
        continue
    fi
    check "$base-full" "$t" "$full"
    cap=$(oom_capacity "$base" "$t" "$OUT/$base-full.pred.json")
    if [ -z "$cap" ]; then
        say "$base: could not work out a capacity that makes it OOM (see $log)"
        fails=$((fails + 1))
        continue
    elif [ "$cap" = none ]; then
        say "$base: no capacity makes it OOM once its initial state fits (its peak is the"
        say "memory alive when the snapshot began): OOM case skipped"
        printf '%-34s %s\n' "$base-oom" "skipped: the initial state is the peak" >>"$summary"
    else
        check "$base-oom" "$t" "$cap"
    fi
    if [ "$base" = bert ]; then
        xs=expandable_segments:True
        cap=$(oom_capacity "$base-expandable" "$t" "$OUT/$base-full.pred.json" --alloc-conf "$xs")
        case "$cap" in
        "" | none) say "$base-oom-expandable: no OOM capacity found: skipped" ;;
        *) check "$base-oom-expandable" "$t" "$cap" --alloc-conf "$xs" ;;
        esac
    fi
done

say ""
say "== summary (details: $OUT)"
cat "$summary" | tee -a "$log"
if [ "$fails" -ne 0 ]; then
    say "device-check: $fails case(s) did not pass"
    exit 1
fi
say "device-check: every case passed"
