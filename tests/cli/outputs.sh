#!/usr/bin/env bash
# outputs.sh GMSIM SOURCE_DIR - where results go: --json FILE|- on every
# command (info included), an output option never swallows a trace or
# another option, fit --html and tune --html pages (self-contained, read
# back from their JSON), and fit's verdict keeps what runs on stock PyTorch
# apart from what needs a custom allocator.
set -u
gmsim=$1
src=${2:-.}
bert=$src/traces/bert.h5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# run WANT_RC WHAT -- CMD...: stdout in $tmp/out, stderr in $tmp/err
run() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want ($(head -c 400 "$tmp/err"))"
}

has() { grep -Eq -- "$1" "$2" || fail "no line matching '$1' in $(basename "$2"): $(head -c 600 "$2")"; }

# --- a trace given where an output file belongs: exit 2, the fix named ---
for c in "run" "compare --policies lru" "fit --policies pytorch" "info" "tune"; do
    # shellcheck disable=SC2086
    run 2 "$c --json TRACE" -- "$gmsim" $c --json "$bert"
    has "--json .*bert.h5: that is a trace \(an HDF5 file\), not a file to write; --json takes the output file \(e.g. --json out.json, or --json - for standard output\)" "$tmp/err"
done
run 2 "run --html SNAPSHOT" -- "$gmsim" run --html "$src/tests/data/small-with-segments.pickle" "$bert"
has "that is a PyTorch memory snapshot, not a file to write" "$tmp/err"
run 2 "run --json --html" -- "$gmsim" run "$bert" --json --html "$tmp/r.html"
has "--json --html: that is an option, not a file to write" "$tmp/err"
[ ! -e "$tmp/r.html" ] || fail "run --json --html wrote a page anyway"
run 2 "--json ''" -- "$gmsim" run "$bert" --json ""
has "--json needs a file name to write \(or - for standard output\)" "$tmp/err"
# -o may replace an old trace (import, gen): not refused as a trace
run 0 "gen -o an existing trace" -- "$gmsim" gen bert --layers 1 --hidden 64 --heads 2 --vocab 100 --seq 8 --batch 1 --iterations 1 -o "$tmp/g.h5"
run 0 "gen -o it again" -- "$gmsim" gen bert --layers 1 --hidden 64 --heads 2 --vocab 100 --seq 8 --batch 1 --iterations 2 -o "$tmp/g.h5"

# --- --json - is standard output, for info as for the others ---
run 0 "info --json -" -- "$gmsim" info --json - "$bert"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["events"] > 0, d' "$tmp/out" ||
    fail "info --json - did not print the summary as JSON"
run 0 "info --json FILE" -- "$gmsim" info "$bert" --json "$tmp/info.json"
# ... and the table on stdout, as run prints its table beside --json FILE
grep -q "^events:" "$tmp/out" || fail "info --json FILE did not print the table on stdout"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["events"] > 0, d' "$tmp/info.json" ||
    fail "info --json FILE did not write the summary"
run 0 "info --json - (the table on stderr)" -- "$gmsim" info --json - "$bert"
grep -q "^events:" "$tmp/err" || fail "info --json - did not print the table on stderr"
run 0 "the same summary again, to stdout" -- "$gmsim" info --json - "$bert"
cmp -s "$tmp/out" "$tmp/info.json" || fail "info --json FILE and --json - differ"
# with --json -, stdout is the JSON alone; the table or verdict goes to stderr
run 0 "run --json -" -- "$gmsim" run -q "$bert" --json -
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["schema"] == "gmsim-result/1"' \
    "$tmp/out" || fail "run --json - did not print the result alone"
has "^fits: no OOM; peak reserved" "$tmp/err"
run 0 "fit --json -" -- "$gmsim" fit "$bert" --policies pytorch --json -
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["schema"] == "gmsim-fit/1"' \
    "$tmp/out" || fail "fit --json - did not print the result alone"
has "^smallest device: pytorch at [0-9.]+ GiB \([0-9]+ MiB\)$" "$tmp/err"
# the exact size it prints is the JSON's, and --capacity takes it back: it fits there
mib=$(sed -n 's/^smallest device: pytorch at [0-9.]* GiB (\([0-9]*\) MiB)$/\1/p' "$tmp/err")
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["results"][0]["capacity_bytes"] == int(sys.argv[2]) << 20, (d["results"][0]["capacity_bytes"], sys.argv[2])' \
    "$tmp/out" "$mib" || fail "fit's MiB figure is not its answer"
run 0 "run at fit's answer" -- "$gmsim" run -q "$bert" --capacity "${mib}MiB"
has "^fits: no OOM" "$tmp/out"

# --- fit: stock PyTorch apart from custom allocators; --html ---
run 0 "fit -q" -- "$gmsim" fit -q "$bert" --json "$tmp/f.json" --html "$tmp/f.html"
has "^fits: the smallest card is [0-9.]+ GiB as deployed today \(pytorch\); [0-9.]+ GiB with a custom allocator \(predictive\)$" "$tmp/out"
python3 - "$tmp/f.json" "$tmp/f.html" <<'PY' || fail "fit --html does not show fit --json's answers"
import json, sys
d = json.load(open(sys.argv[1]))
page = open(sys.argv[2]).read()
rows = {r["policy"]: r for r in d["results"]}
assert rows["pytorch"]["deployable"] is True and rows["predictive"]["deployable"] is False, rows
assert rows["oracle"]["deployable"] is False
dep = rows["pytorch"]["capacity_bytes"] / 2**30
best = rows["predictive"]["capacity_bytes"] / 2**30
assert best < dep, (best, dep)
assert "as deployed today: %.3f GiB" % dep in page, "deployable answer missing"
assert "%.3f GiB with a custom allocator" % best in page, "custom answer missing"
assert "default-src 'none'" in page and "http" not in page.split("</head>")[1], "not self-contained"
PY
run 0 "fit table" -- "$gmsim" fit "$bert"
has "^  \(predictive needs a custom allocator; as deployed today: pytorch at [0-9.]+ GiB \([0-9]+ MiB\)\)$" "$tmp/out"

# --- only the oracle asked: its bound is the verdict, the table's row, and exit 0 ---
run 0 "fit -q --policies oracle --tenants" -- "$gmsim" fit -q "$bert" --policies oracle --tenants 3 --capacity 80GiB --json "$tmp/o.json"
has "^bound: 3 copies \(oracle, UNREALIZABLE: reads the trace's future; no realizable policy asked\)$" "$tmp/out"
python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))["results"][0]; assert r["policy"] == "oracle" and r["copies_fit"] == 3, r' \
    "$tmp/o.json" || fail "fit --tenants' bound is not the JSON's oracle row"
run 0 "fit -q --policies oracle" -- "$gmsim" fit -q "$bert" --policies oracle --json "$tmp/o.json"
mib=$(sed -nE 's/^bound: the smallest card is [0-9.]+ GiB, ([0-9]+) MiB \(oracle, UNREALIZABLE.*$/\1/p' "$tmp/out")
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["results"][0]["capacity_bytes"] == int(sys.argv[2]) << 20' \
    "$tmp/o.json" "$mib" || fail "fit's bound ($mib MiB) is not the JSON's oracle answer"
run 3 "fit -q --policies oracle, too small" -- "$gmsim" fit -q "$bert" --policies oracle --capacity 256MiB --max-capacity 512MiB
has "^OOM: nothing runs without OOM up to 512.00 MiB$" "$tmp/out"
run 0 "compare -q --policies oracle" -- "$gmsim" compare -q "$bert" --policies oracle --json "$tmp/o.json"
has "^bound: no OOM, peak reserved [0-9.]+ GiB \(oracle, UNREALIZABLE: reads the trace's future; no realizable policy asked\)$" "$tmp/out"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["verdict"] == "fits"' "$tmp/o.json" ||
    fail "compare --policies oracle: the JSON's verdict is not the bound's"
run 3 "compare -q --policies oracle, too small" -- "$gmsim" compare -q "$bert" --policies oracle --capacity 3GiB
has "^OOM: even the bound runs out of memory on 3.00 GiB \(oracle, UNREALIZABLE" "$tmp/out"

# --- tune --html: the paste line and every setting, from the JSON ---
run 0 "tune --html" -- "$gmsim" tune -q "$bert" --capacity 5GiB --json "$tmp/t.json" --html "$tmp/t.html"
python3 - "$tmp/t.json" "$tmp/t.html" <<'PY' || fail "tune --html does not show tune --json's ranking"
import json, sys, html
d = json.load(open(sys.argv[1]))
page = open(sys.argv[2]).read()
assert html.escape(d["paste"], quote=False) in page, "paste line missing"
rows = page.count("<tr") - 1
assert rows == len(d["settings"]), (rows, len(d["settings"]))
first = page.index("<tr class=\"win\">")
assert html.escape(d["best"], quote=False) in page[first:first + 400], "rank 1 is not the best"
# the chart: one point per setting, each named in its tooltip
assert "Peak reserved against driver time" in page
assert page.count("<circle") == len(d["settings"]), (page.count("<circle"), len(d["settings"]))
PY
run 2 "tune --html TRACE" -- "$gmsim" tune --capacity 5GiB --html "$bert"

# --- progress: off when stderr is not a terminal, on with --progress ---
run 0 "compare, not a terminal" -- env GMSIM_PROGRESS_AFTER=0 "$gmsim" compare -q "$bert"
grep -q "done in" "$tmp/err" && fail "compare printed progress to a file"
run 0 "compare --progress" -- env GMSIM_PROGRESS_AFTER=0 "$gmsim" compare -q --progress "$bert"
for p in pytorch predictive oracle; do
    has "^gmsim compare: $p: done in [0-9.]+ s, 0 OOMs, peak reserved [0-9.]+ GiB$" "$tmp/err"
done
# the sample fits: lru's and priority's run is pytorch's (study/same_run.h)
for p in lru priority; do
    has "^gmsim compare: $p: done in [0-9.]+ s, 0 OOMs, peak reserved [0-9.]+ GiB: the run of pytorch \(no driver call was refused, so neither policy acted\)$" "$tmp/err"
done
run 0 "compare --progress --no-progress" -- env GMSIM_PROGRESS_AFTER=0 "$gmsim" compare -q --progress --no-progress "$bert"
grep -q "done in" "$tmp/err" && fail "--no-progress still printed progress"
run 0 "compare --progress, quick" -- "$gmsim" compare -q --progress --policies pytorch "$bert"
grep -q "done in" "$tmp/err" && fail "progress in the first second (quick commands stay quiet)"
run 0 "fit --progress" -- env GMSIM_PROGRESS_AFTER=0 "$gmsim" fit -q --progress --policies pytorch "$bert"
has "^gmsim fit: pytorch: run 1: fits at 80.000 GiB$" "$tmp/err"
has "^gmsim fit: pytorch: run [0-9]+: OOM at [0-9.]+ GiB$" "$tmp/err"
run 0 "tune --progress" -- env GMSIM_PROGRESS_AFTER=0 "$gmsim" tune -q --progress --no-fit --capacity 5GiB "$bert"
tr '\r' '\n' <"$tmp/err" >"$tmp/err.lines"
has "^gmsim tune: 120 of 120 settings simulated" "$tmp/err.lines"

# --- a killed gen leaves no temporary file (and no half trace) ---
# python3 starts gen with default signal dispositions (a shell's background
# job would have SIGINT ignored, and gmsim keeps an ignored signal ignored)
for sig in INT TERM HUP; do
    for model in "bert --iterations 20000" "gpt --model gpt2 --iterations 4000"; do
        rm -f "$tmp"/big.h5*
        # shellcheck disable=SC2086
        out=$(python3 - "$sig" "$tmp/big.h5" "$gmsim" gen $model <<'PY'
import glob, signal, subprocess, sys, time
sig, out, cmd = getattr(signal, "SIG" + sys.argv[1]), sys.argv[2], sys.argv[3:] + ["-o", sys.argv[2]]
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
seen = False
for _ in range(400):  # until its temporary file exists (at most 20 s)
    if glob.glob(out + ".tmp.*"):
        seen = True
        break
    time.sleep(0.01)
time.sleep(0.05)
p.send_signal(sig)
rc = p.wait()
print("seen" if seen else "unseen", rc, " ".join(sorted(glob.glob(out + "*"))))
PY
)
        set -- $out
        [ "$1" = seen ] || fail "gen $model: no temporary file seen"
        [ "$2" != 0 ] || fail "gen $model finished before SIG$sig; make it longer"
        [ -z "${3:-}" ] || fail "gen $model killed by SIG$sig left: ${*:3}"
    done
done

[ "$fails" -eq 0 ] && echo "outputs: all passed"
exit $((fails > 0))
