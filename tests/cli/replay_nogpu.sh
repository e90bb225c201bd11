#!/usr/bin/env bash
# replay_nogpu.sh GMSIM SOURCE_DIR - gmreplay on a machine without a CUDA
# driver or GPU: it starts, and exits 1 with a clear "no CUDA driver" / "no
# GPU" message (never a crash, never a loader error); misuse exits 2 before
# any driver is looked for. Skipped when gmreplay was not built (no toolkit).
set -u
gmsim=$1
src=${2:-.}
gmreplay=$(dirname "$gmsim")/gmreplay # next to gmsim (replay/CMakeLists.txt)
if [ ! -x "$gmreplay" ]; then
    echo "replay_nogpu.sh: skipped: gmreplay was not built (no CUDA toolkit at configure time)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# expect CODE PATTERN DESCRIPTION -- command...: exit CODE, stderr matches PATTERN
expect() {
    local want=$1 pat=$2 what=$3
    shift 4
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want ($(head -c 300 "$tmp/err"))"
    grep -Eq -- "$pat" "$tmp/err" || fail "$what: stderr does not match '$pat': $(cat "$tmp/err")"
    grep -q "Segmentation\|Aborted\|error while loading" "$tmp/err" && fail "$what: crashed"
}

trace=$src/traces/bert.h5
no_driver='^gmreplay: no CUDA driver: cannot load .*libcuda\.so\.1'

# The binary has no link-time dependency on the driver.
ldd "$gmreplay" | grep -q libcuda && fail "gmreplay is linked against libcuda"

# This machine, as it is (only when it really has no driver).
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && [ ! -e /dev/nvidiactl ]; then
    expect 1 "$no_driver" "replay here" -- "$gmreplay" "$trace" -o "$tmp/m.json"
    grep -q "gmsim run" "$tmp/err" || fail "the message does not point to 'gmsim run'"
    [ -e "$tmp/m.json" ] && fail "a failed replay wrote $tmp/m.json"
    expect 1 "$no_driver" "calibrate here" -- "$gmreplay" --calibrate -o "$tmp/p.json"
else
    echo "replay_nogpu.sh: this machine has a CUDA driver; the 'as it is' checks are skipped"
fi

# No driver library, wherever it is run.
GMREPLAY_LIBCUDA=/nonexistent/libcuda.so.1 expect 1 "$no_driver" "missing driver library" -- \
    "$gmreplay" "$trace" -o "$tmp/m.json"
# The toolkit's stub is not a driver.
for stub in /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/targets/*/lib/stubs/libcuda.so; do
    [ -f "$stub" ] || continue
    GMREPLAY_LIBCUDA=$stub expect 1 "no CUDA driver: .*stub" "stub library" -- \
        "$gmreplay" "$trace" -o "$tmp/m.json"
    break
done

# Help and misuse need no driver.
"$gmreplay" --help >"$tmp/help" 2>&1 || fail "--help exited $?"
for opt in --winner --pace --calibrate --capacity --device-profile --policy -o; do
    grep -q -- "$opt" "$tmp/help" || fail "--help does not mention $opt"
done
"$gmreplay" --version | grep -q "^gmreplay " || fail "--version"
expect 2 "-o" "no output file" -- "$gmreplay" "$trace"
expect 2 "no trace" "no trace" -- "$gmreplay" -o "$tmp/m.json"
expect 2 "unknown option" "unknown option" -- "$gmreplay" --bogus "$trace" -o "$tmp/m.json"

# gmsim validate: usage and unreadable files
expect 2 "PREDICTED" "validate without files" -- "$gmsim" validate
expect 1 "nonexistent" "validate of missing files" -- "$gmsim" validate /nonexistent/a.json \
    /nonexistent/b.json
"$gmsim" validate --help | grep -q -- "--html" || fail "validate --help"
"$gmsim" run --help | grep -q -- "--device-profile" || fail "run --help lacks --device-profile"

if [ "$fails" -ne 0 ]; then
    echo "replay_nogpu.sh: $fails check(s) failed" >&2
    exit 1
fi
echo "replay_nogpu.sh: all checks passed"
