# diff_lib.sh - what bench/policy_diff.sh and bench/ff_diff.sh share:
# sourced, with $tmp a scratch folder and $fail the scripts' verdict.

# A results JSON without what differs from one run to the next.
strip() { grep -v -e '"created_utc"' -e '"wall_s"' "$1"; }

# compare_json LABEL A B: the two results the same but for their time
# stamps, else the difference printed and fail=1.
compare_json() {
    if ! diff <(strip "$2") <(strip "$3") >"$tmp/d"; then
        echo "DIFF $1"
        head -10 "$tmp/d"
        fail=1
    fi
}

# trace_peak GMSIM TRACE: the trace's own peak reserved bytes into $peak,
# to put it under pressure, and into cap0 the capacity its runs need
# (--capacity 80GiB for a snapshot that does not record its device's
# size, else none). Returns 1, saying why, when the trace does not run.
trace_peak() {
    local g=$1 t=$2
    cap0=()
    if ! "$g" run -q --json "$tmp/p.json" "$t" >/dev/null 2>&1; then
        cap0=(--capacity 80GiB)
        if ! "$g" run -q --json "$tmp/p.json" "${cap0[@]}" "$t" >/dev/null 2>&1; then
            echo "skipped $t: $("$g" run -q "${cap0[@]}" "$t" 2>&1 >/dev/null | head -c 120)"
            return 1
        fi
    fi
    peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['device']['peak_reserved_bytes'])" "$tmp/p.json")
}
