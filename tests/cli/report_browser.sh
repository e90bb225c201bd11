#!/usr/bin/env bash
# report_browser.sh GMSIM SOURCE_DIR - the HTML report opened in a real
# browser (Debian's chromium, headless): the comparison table, one chart per
# run and the winner are in the rendered DOM; nothing from a hostile trace
# or results file runs or becomes markup; a screenshot is kept as an
# artifact next to gmsim (report-screenshot.png), and report_drive.py drives
# the run, compare and state-only pages (zoom, hover, tooltips, console
# errors; report-run.png, report-compare.png, report-state.png).
#
# chromium is required: without it this test FAILS (CI installs it with
# `apt-get install -y chromium`); it never passes silently.
set -u
gmsim=$1
src=${2:-.}
build=$(cd "$(dirname "$gmsim")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# expect_fail CODE DESCRIPTION -- command...: exit code CODE and a "gmsim" message on stderr
expect_fail() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want"
    grep -q "gmsim" "$tmp/err" || fail "$what: no message on stderr"
}

# --- the command line, before any browser is needed ---
"$gmsim" report --help | grep -q -- '--output' || fail "report --help"
"$gmsim" run --help | grep -q -- '--html' || fail "run --help does not list --html"
echo '{"schema": "gmsim-result/1"' >"$tmp/broken.json"
echo '{"schema": "other/1"}' >"$tmp/other.json"
expect_fail 2 "report without -o" -- "$gmsim" report "$tmp/other.json"
expect_fail 2 "report without results" -- "$gmsim" report -o "$tmp/x.html"
expect_fail 2 "report with an unknown option" -- "$gmsim" report --bogus "$tmp/other.json" -o "$tmp/x.html"
expect_fail 1 "report of a missing file" -- "$gmsim" report "$tmp/none.json" -o "$tmp/x.html"
grep -q "none.json" "$tmp/err" || fail "report of a missing file: message does not name it"
expect_fail 1 "report of broken JSON" -- "$gmsim" report "$tmp/broken.json" -o "$tmp/x.html"
expect_fail 1 "report of another schema" -- "$gmsim" report "$tmp/other.json" -o "$tmp/x.html"
grep -q "other/1" "$tmp/err" || fail "report of another schema: message does not name it"
[ -e "$tmp/x.html" ] && fail "a failed report left $tmp/x.html"
expect_fail 1 "run --html into a missing directory" -- \
    "$gmsim" run -q "$src/traces/bert.h5" --html "$tmp/no/such/dir/r.html"

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "FAIL: chromium is not installed; this test needs Debian's chromium" \
        "(apt-get install -y chromium; .ci/run installs it)" >&2
    exit 1
fi

# headless chromium with a fresh profile: chrome OUT_ARGS... URL
chrome() {
    local profile
    profile=$(mktemp -d)
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" "$@" 2>>"$tmp/chromium.log"
    local rc=$?
    rm -rf "$profile"
    return $rc
}

# expect FILE PATTERN WHAT: FILE contains the fixed string PATTERN
expect() {
    grep -qF -- "$2" "$1" || fail "$3 (no '$2' in $(basename "$1"))"
}
# refuse FILE PATTERN WHAT: FILE does not contain PATTERN
refuse() {
    grep -qF -- "$2" "$1" && fail "$3 ('$2' found in $(basename "$1"))"
}

# --- a trace whose path (and so its recorded command) attacks the page ---
evil="$tmp/\"><img src=x id=gm-pwned onerror=document.title='PWNED'>"
mkdir -p "$evil" || { echo "FAIL: cannot make a directory with markup in its name" >&2; exit 1; }
"$gmsim" gen bert --layers 2 --hidden 128 --heads 4 --batch 4 --seq 64 --iterations 3 \
    -o "$evil/small.h5" >/dev/null 2>"$tmp/gen.err" || fail "gen: $(cat "$tmp/gen.err")"

# run --html straight from the hostile trace
"$gmsim" run -q "$evil/small.h5" --json "$tmp/a.json" --html "$tmp/run.html" 2>"$tmp/run.err" ||
    fail "run --html exited $? ($(cat "$tmp/run.err"))"
# three runs that differ in their inputs, as one comparison (what `report` does
# with several results files); one of them OOMs on a small device
"$gmsim" run -q "$evil/small.h5" --alloc-conf expandable_segments:True --json "$tmp/b.json" \
    2>>"$tmp/run.err" || fail "run b exited $?"
"$gmsim" run -q "$evil/small.h5" --capacity 600MiB --on-oom skip --json "$tmp/c.json" \
    >/dev/null 2>>"$tmp/run.err"
rc=$? # 3: the OOM it was asked for
[ "$rc" -eq 3 ] || fail "run c exited $rc, expected 3 ($(cat "$tmp/run.err"))"
# results files can hold anything: a <script> in the source must stay text
sed -e 's|"source": "synthetic:bert"|"source": "synthetic:<script>document.title=\\"PWNED\\";var p=document.createElement(\\"p\\");p.id=\\"gm-pwned-script\\";document.body.appendChild(p)</script>"|' \
    "$tmp/a.json" >"$tmp/a-evil.json"
grep -q 'gm-pwned-script' "$tmp/a-evil.json" || fail "could not plant the script in the JSON"
"$gmsim" report "$tmp/a-evil.json" "$tmp/b.json" "$tmp/c.json" --trace-stats \
    -o "$tmp/cmp.html" 2>"$tmp/report.err" || fail "report exited $? ($(cat "$tmp/report.err"))"

# `compare --html`, once that command exists
if "$gmsim" compare --help 2>/dev/null | grep -q -- '--html'; then
    "$gmsim" compare "$evil/small.h5" --html "$tmp/compare.html" >/dev/null 2>"$tmp/cmp.err" ||
        fail "compare --html exited $? ($(cat "$tmp/cmp.err"))"
    pages="run cmp compare"
else
    echo "note: 'gmsim compare --html' not available yet; checked run --html and report"
    pages="run cmp"
fi

for page in $pages; do
    html="$tmp/$page.html"
    [ -s "$html" ] || { fail "$page.html was not written"; continue; }
    size=$(wc -c <"$html")
    [ "$size" -lt 2000000 ] || fail "$page.html is $size bytes (a few hundred KB expected)"
    refuse "$html" "http://" "$page.html refers to the network"
    refuse "$html" "https://" "$page.html refers to the network"
    start=$(date +%s%N)
    chrome --dump-dom "file://$html" >"$tmp/$page.dom" || fail "chromium --dump-dom on $page.html exited $?"
    ms=$(((($(date +%s%N) - start)) / 1000000))
    dom="$tmp/$page.dom"
    [ -s "$dom" ] || { fail "$page: empty DOM dump"; continue; }
    # the page's own script ran (so a planted one would have had its chance)
    grep -q '<html lang="en" class="[^"]*js' "$dom" || fail "$page: the page's script did not run"
    expect "$dom" 'id="cmp-table"' "$page: comparison table missing"
    # (text serializes '<' as &lt;, so only a real element matches)
    grep -Eq '<[a-zA-Z]+[^<>]* id="gm-pwned' "$dom" &&
        fail "$page: markup from the trace became an element"
    refuse "$dom" '<title>PWNED' "$page: a script from the trace ran"
    grep -q '<title>gmsim report: ' "$dom" || fail "$page: page title changed"
    expect "$dom" '&lt;img src=x id=gm-pwned' "$page: the hostile path is not shown as text"
    runs=$(grep -o '<svg class="chart tl" id="mem-[0-9]*"' "$dom" | sort -u | wc -l)
    rows=$(grep -o '<a href="#run-[0-9]*">' "$dom" | sort -u | wc -l)
    [ "$runs" -ge 1 ] && [ "$runs" -eq "$rows" ] ||
        fail "$page: $runs memory charts for $rows table rows (one per run expected)"
    frags=$(grep -o '<svg class="chart tl" id="frag-[0-9]*"' "$dom" | sort -u | wc -l)
    [ "$frags" -eq "$runs" ] || fail "$page: $frags fragmentation charts for $runs runs"
    expect "$dom" 'aria-label="allocation sizes"' "$page: no allocation-size histogram"
    if [ "$rows" -gt 1 ]; then
        expect "$dom" 'class="badge win"' "$page: no winner marked"
        expect "$dom" '<b>Winner: ' "$page: no winner named"
        expect "$dom" 'id="overlay"' "$page: no overlay chart of every run"
    fi
    echo "$page.html: $size bytes, $runs run(s), DOM in ${ms} ms"
done
refuse "$tmp/cmp.dom" '<p id="gm-pwned-script"' "cmp: the planted script made its element"
expect "$tmp/cmp.dom" 'synthetic:&lt;script&gt;document.title=' "cmp: planted script not shown as text"

# screenshot of the comparison, kept as an artifact
shot="$build/report-screenshot.png"
rm -f "$shot"
chrome --hide-scrollbars --window-size=1280,2600 --screenshot="$shot" "file://$tmp/cmp.html" \
    >/dev/null || fail "chromium --screenshot exited $?"
if [ -s "$shot" ] && [ "$(head -c 8 "$shot" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
    cp "$tmp/cmp.html" "$build/report-screenshot.html"
    echo "screenshot: $shot (page: $build/report-screenshot.html)"
else
    fail "no PNG screenshot at $shot"
fi

# --- used as a user would: DevTools-driven chromium (report_drive.py) ---
# run, compare and a state-only snapshot page: no console error or CSP
# violation; a drag zooms every time chart and reset restores it; a hover
# writes the cursor's read-out and an allocation band's tooltip (read back);
# a click pins the band; full-page screenshots stay in the build directory.
"$gmsim" run -q "$src/tests/data/oom-state-torch20.pickle" --capacity 16GiB \
    --html "$tmp/state.html" >/dev/null 2>"$tmp/state.err" || fail "state-only run --html: $(cat "$tmp/state.err")"
grep -q '>0 B<\|, 0 B,' "$tmp/state.html" && fail "state.html says 0 B for something it does not know"
drive() {
    python3 "$src/tests/cli/report_drive.py" "$browser" "$@" || fail "report_drive.py $*"
}
# an OOM run: its segment maps say why the request did not fit
"$gmsim" run -q "$evil/small.h5" --capacity 600MiB --on-oom skip --html "$tmp/oom.html" \
    >/dev/null 2>"$tmp/oom.err"
[ "$?" -eq 3 ] || fail "OOM run --html: $(cat "$tmp/oom.err")"
drive "$tmp/run.html" "$build/report-run.png" --zoom mem-0 --bands --segmap --deep mem-0
drive "$tmp/oom.html" "$build/report-oom.png" --segmap --oom
# OOMs away from the peak (bert's first at 252 ms, its peak at 317 ms): the
# zoom pyramid has windows around them too, down to single events
"$gmsim" gen bert --iterations 20 -o "$tmp/bert20.h5" >/dev/null 2>"$tmp/gen.err" ||
    fail "gen bert: $(cat "$tmp/gen.err")"
"$gmsim" run -q "$tmp/bert20.h5" --capacity 4.6GiB --on-oom skip --html "$tmp/oom-deep.html" \
    >/dev/null 2>"$tmp/oomd.err"
[ "$?" -eq 3 ] || fail "bert OOM run --html: $(cat "$tmp/oomd.err")"
drive "$tmp/oom-deep.html" "$build/report-oom-deep.png" --deep-oom mem-0 --zoom mem-0
[ -s "$tmp/compare.html" ] && drive "$tmp/compare.html" "$build/report-compare.png" --zoom alloc-0 --bands
# the search pages: tune's Pareto chart and fit's table answer a hover
"$gmsim" tune -q --capacity 8GiB --html "$tmp/tune.html" "$src/tests/data/gpt-medium-ctx128-train.pickle" \
    >/dev/null 2>"$tmp/tune.err" || fail "tune --html: $(cat "$tmp/tune.err")"
"$gmsim" fit -q --html "$tmp/fit.html" "$src/tests/data/gpt-medium-ctx128-train.pickle" \
    >/dev/null 2>"$tmp/fit.err" || fail "fit --html: $(cat "$tmp/fit.err")"
drive "$tmp/tune.html" "$build/report-tune.png" --tip pareto
drive "$tmp/fit.html" "$build/report-fit.png" --tip fits
drive "$tmp/state.html" "$build/report-state.png" --bands
for png in run oom oom-deep oom-deep-deep-oom compare state tune fit; do
    [ -s "$build/report-$png.png" ] && echo "screenshot: $build/report-$png.png"
done

if [ "$fails" -ne 0 ]; then
    echo "report_browser.sh: $fails check(s) failed; chromium said:" >&2
    tail -n 20 "$tmp/chromium.log" >&2
    exit 1
fi
echo "report_browser.sh: all checks passed"
