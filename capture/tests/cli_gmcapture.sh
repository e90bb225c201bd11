#!/usr/bin/env bash
# cli_gmcapture.sh GMCAPTURE - the launcher's contract where no trace can be
# written (this machine has no GPU driver, or the command never uses CUDA):
# the command still runs, gmcapture says why nothing was recorded, and the
# exit status is non-zero (the command's own when it failed). Usage errors
# exit 2.
set -u
gmc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail=0
check() { # description, condition...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
has_driver() { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; }

# 1. a command that succeeds: it runs, no trace, exit 1, a clear message
"$gmc" -o x.h5 -- sh -c 'touch marker' 2>err.txt
rc=$?
check "command ran" test -f marker
check "exit status non-zero when no trace ($rc)" test "$rc" -ne 0
check "message: no trace was written" grep -q "gmcapture: no trace was written" err.txt
if ! has_driver; then
    check "message names the missing driver" grep -q "libcuda.so.1" err.txt
    check "message says the program ran without capture" grep -q "without GPU capture" err.txt
fi
check "no file appeared" test ! -e x.h5

# 2. a failing command: its exit status is passed through
"$gmc" -q -o y.h5 -- sh -c 'exit 7' 2>err2.txt
rc=$?
check "exit status of the command (7 = $rc)" test "$rc" -eq 7
check "message even when quiet" grep -q "no trace was written" err2.txt

# 3. the command's options are its own, and the environment is set for it
# shellcheck disable=SC2016 # expanded by the inner shell
"$gmc" -o 'z-%p.h5' --torch-per-tensor --device 1 --kinds device,managed -- \
    sh -c 'echo "$PYTORCH_NO_CUDA_MEMORY_CACHING $GMCAPTURE_DEVICE $GMCAPTURE_KINDS $GMCAPTURE_OUTPUT" > env.txt' \
    2>/dev/null
check "--torch-per-tensor, --device, --kinds, -o reach the program" \
    grep -q "^1 1 device,managed $work/z-%p.h5\$" env.txt

# 4. a command that cannot run: 127, still the message
"$gmc" -o w.h5 -- ./no-such-program 2>err4.txt
rc=$?
check "exit 127 for a missing command ($rc)" test "$rc" -eq 127
check "says it cannot run the command" grep -q "cannot run './no-such-program'" err4.txt

# 5. an output folder that cannot be written: exit 1 before running anything
"$gmc" -o /nonexistent-dir/x.h5 -- sh -c 'touch ran' 2>err5a.txt
check "unwritable output: exit 1" test $? -eq 1
check "unwritable output: says so" grep -q "cannot write the trace into /nonexistent-dir" err5a.txt
check "unwritable output: command not run" test ! -e ran

# 6. usage errors exit 2; --help exits 0
"$gmc" 2>/dev/null
check "no command: exit 2" test $? -eq 2
"$gmc" --kinds bogus -- true 2>err5.txt
check "bad --kinds: exit 2" test $? -eq 2
check "bad --kinds names the kind" grep -q "bogus" err5.txt
"$gmc" --device x -- true 2>/dev/null
check "bad --device: exit 2" test $? -eq 2
"$gmc" --frobnicate -- true 2>/dev/null
check "unknown option: exit 2" test $? -eq 2
"$gmc" -o 2>/dev/null
check "missing value: exit 2" test $? -eq 2
"$gmc" --help >help.txt
check "--help: exit 0" test $? -eq 0
check "--help mentions --torch-per-tensor" grep -q -- "--torch-per-tensor" help.txt

exit $fail
