#!/usr/bin/env bash
# cli_gmcapture_fake.sh GMCAPTURE FAKE_DIR FAKE_APP TRACE_CHECK - gmcapture and
# libgmcapture.so end to end against the stand-in driver and CUPTI of
# tests/fake/: the launcher finds the "driver", the fake cuInit loads the
# injection library, and the trace that lands is checked row by row.
set -u
gmc=$1
fake=$2
app=$3
chk=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GMCAPTURE_FLUSH_MS=10
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

# 1. a normal run: ranges, out-of-order buffers, another device, dropped records
"$gmc" -o basic.h5 -- "$app" basic 2>err1.txt
rc=$?
check "basic: exit 0 ($rc)" test "$rc" -eq 0
check "basic: trace written" test -f basic.h5
"$chk" basic.h5 >sum1.txt 2>&1
cat sum1.txt
check "basic: rows, markers, phases, dropped, metadata" grep -q \
    "^events=5 allocs=3 frees=2 markers=7 iterations=1 initial=0 dropped=3 phases=0/2/1/2 source=cupti device=Fake GPU total=85899345920$" \
    sum1.txt
check "basic: command line recorded" grep -q "^command=$app basic$" sum1.txt
check "basic: workload names the capture" grep -q "^workload=gmcapture .*CUDA driver 13.0" sum1.txt
check "basic: the library reported what it wrote" grep -q "wrote $work/basic.h5: 5 events" err1.txt
check "basic: dropped records reported" grep -q "CUPTI dropped 3 records" err1.txt
check "basic: no temporary file left" test -z "$(ls ./*.tmp.* 2>/dev/null)"

# 1b. the same with the default flush period: every buffer arrives at exit,
# newest first; the trace must be the same
GMCAPTURE_FLUSH_MS='' "$gmc" -q -o slow.h5 -- "$app" basic 2>/dev/null
"$chk" slow.h5 >sum1b.txt 2>&1
check "basic, one late flush: same trace" test "$(head -1 sum1b.txt)" = "$(head -1 sum1.txt)"

# 1c. a reorder window of 0: the trace file is opened during the run and the
# rest is written at exit (HDF5's own exit handler must not close it first)
GMCAPTURE_REORDER_MS=0 "$gmc" -q -o early.h5 -- "$app" basic 2>err1c.txt
"$chk" early.h5 >sum1c.txt 2>&1
check "basic, file opened early: same trace" test "$(head -1 sum1c.txt)" = "$(head -1 sum1.txt)"

# 2. two CUDA processes in one run: the second gets its own file
"$gmc" -q -o two.h5 -- sh -c "'$app' basic && '$app' basic" 2>err2.txt
rc=$?
check "two processes: exit 0 ($rc)" test "$rc" -eq 0
check "two processes: first file" test -f two.h5
check "two processes: second file two.<pid>.h5" \
    test "$(find . -maxdepth 1 -name 'two.[0-9]*.h5' | wc -l)" -eq 1

# 3. %p in the name
"$gmc" -q -o 'p-%p.h5' -- "$app" basic 2>/dev/null
check "%p: one p-<pid>.h5" test "$(find . -maxdepth 1 -name 'p-[0-9]*.h5' | wc -l)" -eq 1

# 4. killed by SIGTERM: the trace still lands, the status says the signal
"$gmc" -q -o term.h5 -- "$app" sigterm 2>err4.txt
rc=$?
check "sigterm: status 128+15 ($rc)" test "$rc" -eq 143
"$chk" term.h5 >sum4.txt 2>&1
check "sigterm: trace with both allocs" grep -q "^events=2 allocs=2 frees=0 " sum4.txt

# 5. a forked child exiting through exit() neither finishes nor touches the
# parent's open trace file
GMCAPTURE_REORDER_MS=0 "$gmc" -q -o fork.h5 -- "$app" fork 2>err5.txt
rc=$?
check "fork: exit 0 ($rc)" test "$rc" -eq 0
"$chk" fork.h5 >sum5.txt 2>&1
check "fork: parent's trace is whole" grep -q "^events=4 allocs=2 frees=2 " sum5.txt
check "fork: no second file" test "$(find . -maxdepth 1 -name 'fork*' | wc -l)" -eq 1

# 5b. a forked child that exits after the parent finished the trace: without
# care, HDF5's exit handler in the child rewrites the file with stale metadata
FAKE_APP_CHILD_PID=late.pid GMCAPTURE_REORDER_MS=0 "$gmc" -q -o late.h5 -- "$app" fork-late \
    2>err5b.txt
# the child outlives the launcher: wait until it has exited (gone, or a zombie)
child=$(cat late.pid 2>/dev/null)
for _ in $(seq 200); do
    [ -n "$child" ] && [ -e "/proc/$child" ] || break
    [ "$(awk '{print $3}' "/proc/$child/stat" 2>/dev/null)" = Z ] && break
    sleep 0.05
done
"$chk" late.h5 >sum5b.txt 2>&1
check "fork, child exits last: trace intact" grep -q "^events=3 allocs=2 frees=1 " sum5b.txt

# 6. a program that never initializes CUDA
"$gmc" -o none.h5 -- "$app" nocuda 2>err6.txt
rc=$?
check "nocuda: exit 1 ($rc)" test "$rc" -eq 1
check "nocuda: says the program never initialized CUDA" grep -q "never initialized CUDA" err6.txt

if [ "$fail" -ne 0 ]; then
    for f in err*.txt; do echo "--- $f"; cat "$f"; done
fi
exit $fail
