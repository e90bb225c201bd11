#!/usr/bin/env bash
# same-output.sh OLD_GMSIM NEW_GMSIM [WORKDIR]
#
# Runs two gmsim binaries on the same inputs and compares everything they
# print and write, byte for byte: stdout, stderr and the exit code of every
# command, and every file the command writes (JSON, HTML, traces). Used to
# show that a refactor did not change behaviour:
#
#   bash scripts/same-output.sh /tmp/gmsim-orig/gmsim build/gmsim
#
# Inputs: traces/bert.h5 and every PyTorch snapshot in $GM_SNAPSHOTS
# (default ../shared/traces/pytorch-snapshots). Commands: info (text, --json),
# run (several policies and options, --json, --html), compare (--json,
# --html), fit (capacity and tenants modes, --json), import then info, run,
# compare and fit of each imported trace, fidelity (snapshot and trace,
# --json), report (one result, a comparison, several results, --trace-stats),
# validate, gen then info.
#
# Each binary runs in its own folder (WORKDIR/old, WORKDIR/new) with the same
# relative file names, so paths in the output are equal. Masked before the
# comparison, because they differ from one run of the same binary to the next
# (mask() below, nothing else):
#   - wall-clock times: "wall_s" in JSON, the "simulated N events in T s
#     (R M events/s)" line of the run table;
#   - creation times ("now" for results and for traces written during the
#     run): "created_utc" in JSON, "created:" in `gmsim info`, and the
#     dates an HTML page shows (masked wherever they appear, also for
#     traces/bert.h5, whose creation time is fixed);
#   - the HTML report's random CSP nonce;
#   - HDF5 traces are not compared as bytes (HDF5 stores the creation time);
#     what they hold is compared through `info --json` and through each
#     run's trace hash (over the metadata and every event).
# Exit 0 when everything is identical, 1 otherwise (the differences printed).
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 OLD_GMSIM NEW_GMSIM [WORKDIR]" >&2
    exit 2
fi
old=$(realpath "$1")
new=$(realpath "$2")
root=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
snaps=${GM_SNAPSHOTS:-$root/../shared/traces/pytorch-snapshots}
bert=$root/traces/bert.h5
rm -rf "$work/old" "$work/new"
mkdir -p "$work/old" "$work/new"

# Every command the comparison covers; $G is the binary, cwd its folder.
cases() {
    n=0
    c() { # c ARGS...: run "$G ARGS", keep stdout, stderr, exit code
        n=$((n + 1))
        local id
        id=$(printf 'c%03d' "$n")
        printf '%s\n' "$*" >"$id.cmd"
        "$G" "$@" >"$id.out" 2>"$id.err"
        echo $? >"$id.rc"
    }
    c --help
    c --version
    for cmd in run compare fit info import fidelity gen report validate; do
        c "$cmd" --help
    done
    c info "$bert"
    c info --json - "$bert"
    c run "$bert"
    c run --json r.json --html r.html "$bert"
    for p in pytorch lru priority predictive oracle "lru:threshold=0.8"; do
        c run --policy "$p" "$bert"
        c run --policy "$p" --json "run-$p.json" "$bert"
    done
    c run --capacity 3GiB "$bert"
    c run --capacity 3GiB --on-oom skip --json oom.json "$bert"
    c run --allocator direct "$bert"
    c run --alloc-conf max_split_size_mb:128 "$bert"
    c run --alloc-conf expandable_segments:True --json exp.json "$bert"
    c run "$bert" --offset 100ms --repeat 2 "$bert"
    c run --scope device --policy lru --capacity 10GiB "$bert" --offset 20ms "$bert"
    c compare "$bert"
    c compare --json c.json --html c.html "$bert"
    c compare --capacity 5.5GiB --policies pytorch,lru:threshold=0.9,oracle --json c2.json "$bert"
    c compare --capacity 16GiB --scope device --json c3.json "$bert" --offset 20ms "$bert" "$bert"
    c fit "$bert"
    c fit --json f.json "$bert"
    c fit --tenants 8 --capacity 24GiB --stagger 20ms --json ft.json "$bert"
    c report r.json -o rep-run.html
    c report c.json -o rep-compare.html
    c report --trace-stats c3.json -o rep-c3.html
    c report run-pytorch.json run-lru.json run-predictive.json run-oracle.json -o rep-multi.html
    c report r.json exp.json oom.json -o rep-inputs.html
    c validate r.json r.json --json v.json --html v.html
    c validate r.json oom.json
    c gen bert --iterations 2 --seed 7 -o gen.h5
    c info --json - gen.h5
    c run --json gen.json gen.h5
    for s in "$snaps"/*.pickle "$snaps"/*.pkl; do
        [ -e "$s" ] || continue
        b=$(basename "$s")
        c import "$s" -o "$b.h5"
        c info "$b.h5"
        c info --json - "$b.h5"
        c fidelity "$s"
        c fidelity --json "$b.fid.json" "$s"
        [ -e "$b.h5" ] || continue
        c fidelity "$b.h5"
        c run "$b.h5" # a snapshot records no device size: an error that names the fix
        # ... so the runs below give one
        c run --capacity 80GiB --json "$b.run.json" --html "$b.run.html" "$b.h5"
        c run --capacity 80GiB --policy predictive "$b.h5"
        c run --capacity 80GiB --policy priority --on-oom skip "$b.h5"
        c compare --capacity 80GiB --json "$b.cmp.json" --html "$b.cmp.html" "$b.h5"
        c fit --capacity 80GiB --json "$b.fit.json" "$b.h5"
        c report "$b.run.json" "$b.cmp.json" -o "$b.rep.html"
    done
}

mask() { # mask FILE: the fields that differ between two runs of one binary
    sed -E -i \
        -e 's/("wall_s": )[-0-9.e+]+/\1WALL/g' \
        -e 's/("created_utc": )"[^"]*"/\1"TIME"/g' \
        -e 's/^(  simulated [0-9]+ events in )[0-9.]+ s \([0-9.]+ M events\/s\)$/\1T s (R M events\/s)/' \
        -e 's/^(created: +)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+Z$/\1TIME/' \
        "$1"
    case "$1" in
    *.html) # the CSP nonce; the dates the page shows (result and trace creation)
        sed -E -i -e "s/nonce(-|=\")[A-Za-z0-9+\/=_-]+/nonce\1NONCE/g" \
            -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z/TIME/g' "$1" ;;
    esac
}

for side in old new; do
    if [ "$side" = old ]; then G=$old; else G=$new; fi
    (cd "$work/$side" && cases)
done

status=0
ncmp=0
for f in "$work/old"/*; do
    name=$(basename "$f")
    case "$name" in *.h5) continue ;; esac
    if [ ! -e "$work/new/$name" ]; then
        echo "DIFF $name: only the old binary wrote it"
        status=1
        continue
    fi
    mask "$f"
    mask "$work/new/$name"
    ncmp=$((ncmp + 1))
    if ! cmp -s "$f" "$work/new/$name"; then
        echo "DIFF $name ($(cat "$work/old/${name%.*}.cmd" 2>/dev/null || echo file))"
        diff "$f" "$work/new/$name" | head -20
        status=1
    fi
done
for f in "$work/new"/*; do
    name=$(basename "$f")
    [ -e "$work/old/$name" ] || { echo "DIFF $name: only the new binary wrote it"; status=1; }
done
ncmd=$(ls "$work/old"/*.cmd | wc -l)
nh5=$(ls "$work/old"/*.h5 2>/dev/null | wc -l)
if [ $status = 0 ]; then
    echo "same output: $ncmd commands, $ncmp files compared (stdout, stderr, exit codes, JSON," \
        "HTML), $nh5 traces written (compared through info --json and trace hashes); in $work"
else
    echo "outputs differ (see above); in $work"
fi
exit $status
