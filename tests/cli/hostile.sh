#!/usr/bin/env bash
# Hostile and sloppy input (issue 18): every file of tests/data/hostile/ ends
# in a clear message and a non-zero exit, within seconds (each command runs
# under `timeout`) and bounded memory (ulimit -v, except under ASan), and
# reads no other file; outputs never destroy data (regular files, symlinks,
# device nodes and FIFOs made in a temporary folder, '-', /dev/stdout).
# Usage: hostile.sh GMSIM SOURCE_DIR
set -u
gmsim=$1 src=$2
hostile=$src/tests/data/hostile
bert=$src/traces/bert.h5
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
export GMSIM_TRACE_TIMEOUT=3 # the reader's watchdog: a hang ends in 3 s
fails=0 total=0
asan=0
ldd "$gmsim" 2>/dev/null | grep -q libasan && asan=1
mem_kib=$((3 * 1024 * 1024)) # 3 GiB of address space for gmsim and its reader
root=0
[ "$(id -u)" = 0 ] && root=1

fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# check NAME EXPECTED_RC PATTERN -- CMD...: exit code, a message, at most 60 s
check() {
    local name=$1 want=$2 pat=$3
    shift 4
    total=$((total + 1))
    if [ "$asan" = 1 ]; then
        timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
    else
        (ulimit -v "$mem_kib"; exec timeout 60 "$@") >"$tmp/out" 2>"$tmp/err"
    fi
    local rc=$?
    if [ "$rc" != "$want" ]; then
        fail "$name: exit $rc, expected $want"; tail -n 5 "$tmp/err"; return
    fi
    if [ -n "$pat" ] && ! grep -qE -- "$pat" "$tmp/out" "$tmp/err"; then
        fail "$name: output lacks /$pat/"; tail -n 5 "$tmp/out" "$tmp/err"; return
    fi
    echo "ok   $name"
}
# expect NAME CONDITION...: a plain assertion
expect() {
    local name=$1
    shift
    total=$((total + 1))
    if "$@"; then echo "ok   $name"; else fail "$name"; fi
}

# ---------------------------------------------------------------- traces
failed="the HDF5 library failed on this file \(damaged or hostile\); nothing was simulated"
for cmd in info run; do
    check "$cmd: damaged global heap (libhdf5 segfaults)" 1 "$failed" -- \
        "$gmsim" $cmd "$hostile/h5-globalheap.h5"
    check "$cmd: damaged metadata cache entry (libhdf5 segfaults)" 1 "$failed" -- \
        "$gmsim" $cmd "$hostile/h5-segv-h5c-protect.h5"
done
check "info: libhdf5 hangs: the watchdog stops it" 1 "$failed.*did not answer within 3 s" -- \
    "$gmsim" info "$hostile/h5-hang.h5"
check "compare: a crashing trace fails every policy cleanly" 1 "$failed" -- \
    "$gmsim" compare -q "$hostile/h5-globalheap.h5"
check "external storage naming /etc/passwd is refused" 1 \
    "/events is kept in external storage .*'/etc/passwd'.*never reads another" -- \
    "$gmsim" info "$hostile/events-external-passwd.h5"
check "2^40 fill-value events: not backed by stored bytes" 1 \
    "/events declares 1099511627776 rows .* stores only 0 bytes" -- \
    "$gmsim" run "$hostile/events-2e40-fill-free.h5"
check "2^26 unallocated /initial_state rows: over the limit" 1 \
    "/initial_state has 67108864 rows, over the limit of 4194304" -- \
    "$gmsim" info "$hostile/init-2e26.h5"
check "negative device_total_bytes is refused" 1 "attribute device_total_bytes is -1; .*cannot be negative" -- \
    "$gmsim" info "$hostile/attr-device_total_bytes-int.h5"
check "markers written by h5py as S64 (ASCII, null-padded) read" 0 '"markers": 2' -- \
    "$gmsim" info --json - "$hostile/markers-ascii-nullpad.h5"
check "a source that is not UTF-8 is escaped in info --json" 0 '"source": "\\\\xff\\\\xfe"' -- \
    "$gmsim" info --json - "$hostile/attr-source-bytes.h5"
check "... and in run --json (to stdout)" 0 '"source": "\\\\xff\\\\xfe"' -- \
    "$gmsim" run -q --alloc-conf '' --json - "$hostile/attr-source-bytes.h5"

# Every input the trace fuzzer kept (tests/fuzz/trace_corpus/: damaged
# files, some of which crash or hang libhdf5): gmsim itself ends cleanly,
# exit 0 or 1 with a message naming the file, never a signal or a hang.
n=0 bad=0
for f in "$src"/tests/fuzz/trace_corpus/*; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    timeout 60 "$gmsim" info "$f" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ "$rc" -gt 1 ] || { [ "$rc" = 1 ] && ! grep -qF "$f" "$tmp/err"; }; then
        bad=$((bad + 1)); echo "  $f: exit $rc"; cat "$tmp/err"
    fi
done
expect "the fuzzer's $n kept inputs: exit 0 or 1, with the file named" test "$bad" = 0

# A FIFO as the trace: refused before open() (which would block), and no one
# opened it: a writer waiting on it would have touched $tmp/opened.
mkfifo "$tmp/fifo.h5"
(exec 3>"$tmp/fifo.h5"; touch "$tmp/opened") &
writer=$!
check "a FIFO given as the trace is refused" 1 "fifo.h5: is not a regular file" -- \
    "$gmsim" info "$tmp/fifo.h5"
expect "... and was never opened" test ! -e "$tmp/opened"
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
check "a directory given as the trace" 1 "is a directory" -- "$gmsim" info "$tmp"

# Too many open files: each open trace holds a descriptor here.
args=()
for i in $(seq 1 40); do args+=("$bert"); done
total=$((total + 1))
(ulimit -n 24; exec timeout 60 "$gmsim" run -q "${args[@]}") >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" = 1 ] && grep -qE "too many open files \([0-9]+ traces open in this process; raise ulimit -n, now 24\)" "$tmp/err"; then
    echo "ok   EMFILE names the traces and ulimit -n"
else
    fail "EMFILE: exit $rc"; cat "$tmp/err"
fi

# ---------------------------------------------------------------- RMM logs
check "RMM log with CR line ends imports its events" 0 "2 events \(1 alloc, 1 free\)" -- \
    "$gmsim" import --format rmm "$hostile/cr-only.csv" -o "$tmp/cr.h5"
check "... which the reader sees" 0 "^events: +2 " -- "$gmsim" info "$tmp/cr.h5"
printf 'Thread,Time,Action,Pointer,Size,Stream\r\n1,0,allocate,0x1000,256,0x0\r\n1,1,free,0x1000,256,0x0\r\n' >"$tmp/crlf.csv"
check "RMM log with CR LF line ends" 0 "2 events \(1 alloc, 1 free\)" -- \
    "$gmsim" import --format rmm "$tmp/crlf.csv" -o "$tmp/crlf.h5"
check "an epoch time that overflows is refused" 1 "line 3: Time '18446744073709.999999' is out of range" -- \
    "$gmsim" import --format rmm "$hostile/time-overflow.csv" -o "$tmp/to.h5"
expect "... and writes nothing" test ! -e "$tmp/to.h5"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,0x1000,25\0006,0x0\n' >"$tmp/nul.csv"
check "a NUL byte in a field is named" 1 "line 2, byte 23: a NUL byte \(0x00\) in field 5" -- \
    "$gmsim" import --format rmm "$tmp/nul.csv" -o "$tmp/nul.h5"

# ---------------------------------------------------------------- reports
check "report: a negative capacity names the field" 1 \
    "capacity-neg.json: inputs.capacity_bytes is -1; it must be a number from 0 to 2\^63" -- \
    "$gmsim" report "$hostile/capacity-neg.json" -o "$tmp/neg.html"
expect "... and writes no report" test ! -e "$tmp/neg.html"
sed 's/"capacity_bytes": -1/"capacity_bytes": 85899345920/' "$hostile/capacity-neg.json" >"$tmp/ok.json"
sed 's/"fragmentation": 0.11082728568625966/"fragmentation": 1.5/' "$tmp/ok.json" >"$tmp/frac.json"
check "report: a fraction of 1.5 names the field" 1 "device.fragmentation is 1.5; it must be from 0 to 1" -- \
    "$gmsim" report "$tmp/frac.json" -o "$tmp/frac.html"
sed 's/"overhead_bytes": 536870912/"overhead_bytes": 1e300/' "$tmp/ok.json" >"$tmp/huge.json"
check "report: 1e300 bytes names the field" 1 "inputs.overhead_bytes is 1.0000000000000001e\+300; it must be a number from 0 to 2\^63" -- \
    "$gmsim" report "$tmp/huge.json" -o "$tmp/huge.html"
check "report: the repaired file renders" 0 "" -- "$gmsim" report "$tmp/ok.json" -o "$tmp/ok.html"
check "report: a trace named --json=... renders" 0 "" -- \
    "$gmsim" report "$hostile/rep-optinj2.json" -o "$tmp/inj.html"
# Paste the reproduce command into a shell, in a folder of its own: the
# trace name must stay a trace name (so the run fails to open it) and no
# victim.txt may appear.
mkdir -p "$tmp/paste/traces"
cp "$bert" "$tmp/paste/traces/bert.h5"
cmd=$(grep -o '<pre class="cmd">[^<]*' "$tmp/inj.html" | head -1 | sed 's/^<pre class="cmd">//' |
    sed "s/&#39;/'/g; s/&quot;/\"/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\\&/g")
expect "reproduce command quotes the trace and ends options with --" \
    grep -qF -- "-- '--json=victim.txt' 'traces/bert.h5'" <<<"$cmd"
mkdir -p "$tmp/bin"
ln -s "$(readlink -f "$gmsim")" "$tmp/bin/gmsim"
(cd "$tmp/paste" && PATH="$tmp/bin:$PATH" timeout 60 sh -c "$cmd") >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] || { echo "pasted: $cmd"; cat "$tmp/err"; }
expect "pasted: it fails on the odd trace name" test "$rc" = 1
expect "pasted: --json=victim.txt was not taken as an option" grep -q -- "--json=victim.txt: cannot open" "$tmp/err"
expect "pasted: no file written" test ! -e "$tmp/paste/victim.txt"
check "the cli takes -- before the traces" 0 "" -- "$gmsim" run -q --policy lru -- "$bert"

# ---------------------------------------------------------------- outputs
cp "$bert" "$tmp/same.h5"
cmp_same() { cmp -s "$bert" "$tmp/same.h5"; }
# refused as a trace where an output belongs (cli.c check_output), before the
# same-file check (which import and report below still reach)
check "run --json same.h5 same.h5 is refused" 2 "--json .*same.h5: that is a trace \(an HDF5 file\), not a file to write" -- \
    "$gmsim" run --json "$tmp/same.h5" "$tmp/same.h5"
expect "... and the input is intact" cmp_same
ln -s same.h5 "$tmp/alias.h5"
check "... also through a symlink (same inode)" 2 "alias.h5: that is a trace \(an HDF5 file\), not a file to write" -- \
    "$gmsim" compare -q --html "$tmp/alias.h5" "$tmp/same.h5"
expect "... and the input is intact" cmp_same
cp "$src/tests/data/tiny-segments-only.pickle" "$tmp/x.pickle"
check "import x.pickle -o x.pickle is refused" 2 "that is the input" -- \
    "$gmsim" import "$tmp/x.pickle" -o "$tmp/x.pickle"
expect "... and the snapshot is intact" cmp -s "$src/tests/data/tiny-segments-only.pickle" "$tmp/x.pickle"
"$gmsim" run -q "$bert" --json "$tmp/r.json" 2>/dev/null
cp "$tmp/r.json" "$tmp/r0.json"
check "report r.json -o r.json is refused" 2 "that is the input" -- \
    "$gmsim" report "$tmp/r.json" -o "$tmp/r.json"
expect "... and the results are intact" cmp -s "$tmp/r.json" "$tmp/r0.json"
check "fidelity --json onto its input is refused" 2 "x.pickle: that is a PyTorch memory snapshot, not a file to write" -- \
    "$gmsim" fidelity "$tmp/x.pickle" --json "$tmp/x.pickle"

# a symlink is followed, not replaced; a dangling one creates its target
ln -s real.json "$tmp/link.json"
check "--json through a dangling symlink" 0 "" -- "$gmsim" run -q "$bert" --json "$tmp/link.json"
expect "... the link stays a link" test -L "$tmp/link.json"
expect "... its target holds the results" grep -q '"schema": "gmsim-result/1"' "$tmp/real.json"
check "--html through the symlink again" 0 "" -- "$gmsim" run -q "$bert" --html "$tmp/link.json"
expect "... still a link, target replaced" test -L "$tmp/link.json" -a -n "$(grep -l '<!DOCTYPE html>' "$tmp/real.json")"
ln -s real.h5 "$tmp/link.h5"
check "a trace through a symlink (gen)" 0 "" -- \
    "$gmsim" gen bert --layers 1 --hidden 64 --heads 2 --vocab 100 --seq 8 --batch 1 --iterations 1 -o "$tmp/link.h5"
expect "... the link stays a link to a trace" test -L "$tmp/link.h5" -a -s "$tmp/real.h5"
check "... which reads back" 0 "^events: " -- "$gmsim" info "$tmp/link.h5"

# '-' is standard output; /dev/stdout is the descriptor itself
check "--json - writes JSON to standard output" 0 '"schema": "gmsim-result/1"' -- \
    "$gmsim" run -q "$bert" --json -
expect "... and makes no file named -" test ! -e ./- -a ! -e "$tmp/-"
"$gmsim" run -q "$bert" --json /dev/stdout >"$tmp/stdout.json" 2>"$tmp/err"
expect "--json /dev/stdout into a redirected file" grep -q '"schema": "gmsim-result/1"' "$tmp/stdout.json"
"$gmsim" import --format rmm "$hostile/cr-only.csv" -o - >"$tmp/stdout.h5" 2>"$tmp/err"
expect "import -o - writes the trace to stdout, the summary to stderr" grep -q "wrote -: 2 events" "$tmp/err"
check "... and that trace reads" 0 "^events: +2 " -- "$gmsim" info "$tmp/stdout.h5"

# a FIFO is written into, not replaced
mkfifo "$tmp/out.fifo"
cat "$tmp/out.fifo" >"$tmp/from-fifo.json" &
reader=$!
check "--json into a FIFO" 0 "" -- "$gmsim" run -q "$bert" --json "$tmp/out.fifo"
wait "$reader"
expect "... the FIFO is still a FIFO" test -p "$tmp/out.fifo"
expect "... and the reader got the JSON" grep -q '"schema": "gmsim-result/1"' "$tmp/from-fifo.json"
cat "$tmp/out.fifo" >"$tmp/from-fifo.h5" &
reader=$!
check "import -o FIFO" 0 "" -- "$gmsim" import --format rmm "$hostile/cr-only.csv" -o "$tmp/out.fifo"
wait "$reader"
check "... the reader got a trace" 0 "^events: +2 " -- "$gmsim" info "$tmp/from-fifo.h5"

# device nodes of our own (never the system's): /dev/null's and /dev/full's numbers
if [ "$root" = 1 ] && mknod "$tmp/null" c 1 3 2>/dev/null && mknod "$tmp/full" c 1 7 2>/dev/null; then
    check "--json into a null device" 0 "" -- "$gmsim" run -q "$bert" --json "$tmp/null"
    expect "... the device node is still a device node" test -c "$tmp/null"
    check "--json into a full device fails" 1 "full: cannot write the JSON results: No space left on device" -- \
        "$gmsim" run -q "$bert" --json "$tmp/full"
    expect "... and the device node is still a device node" test -c "$tmp/full"
    check "--html into a full device fails" 1 "No space left on device" -- \
        "$gmsim" compare -q "$bert" --policies lru --html "$tmp/full"
    check "report -o a full device fails" 1 "No space left on device" -- \
        "$gmsim" report "$tmp/r0.json" -o "$tmp/full"
    check "import -o a full device fails" 1 "No space left on device" -- \
        "$gmsim" import --format rmm "$hostile/cr-only.csv" -o "$tmp/full"
    check "gen -o a full device fails" 1 "No space left on device" -- \
        "$gmsim" gen bert --layers 1 --hidden 64 --heads 2 --vocab 100 --seq 8 --batch 1 --iterations 1 -o "$tmp/full"
    expect "... still a device node" test -c "$tmp/full"
    for c in "run -q" "run" "compare --policies lru" "fit --policies lru" "info" "--help"; do
        # shellcheck disable=SC2086
        total=$((total + 1))
        timeout 60 "$gmsim" $c $([ "$c" = "--help" ] || echo "$bert") >"$tmp/full" 2>"$tmp/err"
        rc=$?
        # run -q writes its one-line verdict, so it fails like the others
        if [ "$rc" = 1 ] && grep -q "cannot write standard output: No space left on device" "$tmp/err"; then
            echo "ok   gmsim $c > full device: exit 1"
        else
            fail "gmsim $c > full device: exit $rc"; cat "$tmp/err"
        fi
    done
    # gmcapture and gmreplay (built beside gmsim when the CUDA toolkit is
    # there) check their standard output at exit the same way
    for tool in gmcapture gmreplay; do
        exe=$(dirname "$gmsim")/$tool
        [ -x "$exe" ] || continue
        total=$((total + 1))
        timeout 60 "$exe" --help >"$tmp/full" 2>"$tmp/err"
        rc=$?
        if [ "$rc" = 1 ] && grep -q "^$tool: cannot write standard output: No space left on device" "$tmp/err"; then
            echo "ok   $tool --help > full device: exit 1"
        else
            fail "$tool --help > full device: exit $rc"; cat "$tmp/err"
        fi
    done
    total=$((total + 1))
    timeout 60 "$gmsim" fidelity "$src/tests/data/tiny-segments-only.pickle" >"$tmp/full" 2>"$tmp/err"
    rc=$?
    if [ "$rc" = 1 ] && grep -q "cannot write standard output" "$tmp/err"; then
        echo "ok   gmsim fidelity > full device: exit 1"
    else
        fail "gmsim fidelity > full device: exit $rc"; cat "$tmp/err"
    fi
else
    echo "skip device nodes: not root, or mknod is not allowed here"
fi
left=$(find "$tmp" -name '*.tmp.*' | wc -l)
expect "no temporary file left behind" test "$left" = 0

echo "$((total - fails)) passed, $fails failed"
[ "$fails" = 0 ]
