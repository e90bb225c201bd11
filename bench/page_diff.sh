#!/usr/bin/env bash
# page_diff.sh - two gmsim builds' HTML pages (and what the commands print)
# on the page commands a speed change to the segment maps or the trace
# statistics must leave as they were: run and compare pages with OOMs
# aborted and skipped, two tenants with an offset, four allocators, the
# policies with timer ticks, --segments-at, --threads 1, snapshots.
#
#   bash bench/page_diff.sh OLD_GMSIM NEW_GMSIM [WORKDIR]
#
# Makes its inputs in WORKDIR (default: a temporary folder, removed at the
# end): b60.h5 (60 BERT iterations) and big5.h5 (1930, 5 M events, ~10 s
# to write). Snapshots come from $GM_SNAPSHOTS (default
# ../shared/traces/pytorch-snapshots); commands that need one it lacks are
# skipped, and say so. Masked before the comparison, as they differ from
# one run of the same build to the next: the page's CSP nonce, dates and
# time stamps, wall times, the temporary names of imported snapshots.
# Exit 0 when every page and every output is the same, 1 otherwise. Not
# part of ctest: it needs a build of the commit to compare against.
set -u
if [ $# -lt 2 ]; then
    sed -n '2,/^set/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
old=$(realpath "$1") new=$(realpath "$2")
here=$(cd "$(dirname "$0")/.." && pwd)
snap=${GM_SNAPSHOTS:-$here/../shared/traces/pytorch-snapshots}
if [ $# -ge 3 ]; then
    work=$(realpath -m "$3")
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
t=$here/traces
b60=$work/b60.h5 big5=$work/big5.h5
[ -f "$b60" ] || "$new" gen bert --iterations 60 -o "$b60" >/dev/null || exit 1
[ -f "$big5" ] || "$new" gen bert --iterations 1930 --compress none -o "$big5" >/dev/null || exit 1
S=$snap
cases=(
    "compare --capacity 4GiB $big5"
    "compare --capacity 4GiB --on-oom skip $b60"
    "compare $b60 $t/gpt2.h5 --capacity 12GiB"
    "compare --capacity 6GiB --allocators pytorch,cuda-async,rmm-pool,tf-bfc $t/bert.h5"
    "compare --capacity 3GiB --on-oom skip $S/device-full-retry-10-streams.pickle"
    "compare --capacity 2GiB $S/gpt-medium-ctx128-train.pickle"
    "compare --policies pytorch,lru,oracle --capacity 4GiB --on-oom skip $t/llama.h5"
    "compare --threads 1 --capacity 5GiB $b60"
    "compare $big5"
    "run --capacity 4GiB --on-oom skip $b60"
    "run $b60 $t/gpt2.h5 --capacity 12GiB"
    "run --segments-at 1.5s --capacity 3GiB --on-oom skip $S/device-full-retry-10-streams.pickle"
    "run $big5"
    "run $t/bert.h5"
    "run --capacity 3GiB $t/bert.h5"
    "run $t/bert.h5 $t/gpt2.h5 --offset 5ms"
    "run --capacity 2GiB $S/gpt-medium-ctx128-train.pickle"
    "run --capacity 80GiB $S/gpt-medium-ctx128-train.pickle"
    "run --policy predictive --capacity 5GiB $b60"
    "run --policy oracle --capacity 4GiB --on-oom skip $t/llama.h5"
    "run --capacity 5GiB $b60 $b60 --offset 100ms --on-oom skip"
    "run --capacity 80GiB $S/expandable-segments-fwd.pickle"
    "run --capacity 80GiB $S/forward-bf16-ctx128.pickle"
    "run --capacity 8GiB $S/gpt-medium-ctx512-infer.pickle"
    "run --capacity 80GiB $S/empty-cache-bursts.pickle"
    "run --capacity 80GiB --policy predictive $S/gpt-medium-ctx128-train.pickle $S/gpt-medium-ctx128-train.pickle --offset 2s"
)
mask() { # file: its text with what differs between two runs of one build masked
    python3 - "$1" <<'PY'
import re, sys
try:
    s = open(sys.argv[1], errors="replace").read()
except OSError:
    print("(no file)")
    sys.exit(0)
for pat, rep in [(r'nonce-[A-Za-z0-9+/=]+', 'N'), (r'nonce="[^"]*"', 'N'),
                 (r'"wall_s":\s*[0-9.e+-]+', 'W'), (r'"created_utc":\s*"[^"]*"', 'C'),
                 (r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', 'D'), (r'in [0-9.]+ s', 'in T s'),
                 (r'gmsim-[A-Za-z0-9]{6}', 'TMP'), (r'[0-9.]+ M events/s', 'R'),
                 (r'/(old|new)/page\.html', '/X/page.html')]:
    s = re.sub(pat, rep, s)
sys.stdout.write(s)
PY
}
fail=0 runs=0
mkdir -p "$work/old" "$work/new"
for c in "${cases[@]}"; do
    missing=0
    for w in $c; do
        case $w in *.pickle) [ -f "$w" ] || missing=1 ;; esac
    done
    if [ $missing = 1 ]; then
        echo "skipped (no snapshot): $c"
        continue
    fi
    rm -f "$work/old/page.html" "$work/new/page.html"
    # shellcheck disable=SC2086
    "$old" $c --html "$work/old/page.html" >"$work/old/out" 2>&1
    ra=$?
    # shellcheck disable=SC2086
    "$new" $c --html "$work/new/page.html" >"$work/new/out" 2>&1
    rb=$?
    runs=$((runs + 1))
    if [ $ra != $rb ] || ! cmp -s <(mask "$work/old/out") <(mask "$work/new/out") ||
        ! cmp -s <(mask "$work/old/page.html") <(mask "$work/new/page.html"); then
        echo "DIFF (exit $ra vs $rb): $c"
        fail=1
    fi
done
echo "$runs page commands compared: $([ $fail = 0 ] && echo identical || echo DIFFERENT)"
exit $fail
