#!/usr/bin/env bash
# A bounded fuzzing run of the trace reader (README.md, "fuzz_trace"):
#   run_trace_fuzz.sh FUZZ_TRACE SECONDS [CORPUS_DIR]
# Starts from the seeds and the kept corpus (copied: the source tree is not
# written unless CORPUS_DIR is given, which then grows), fails if the harness
# finds a crash, a timeout or a memory blow-up; the input that did it is left
# as ./fuzz_trace-crash-* (or -timeout-, -oom-) in the current directory.
set -uo pipefail
fuzzer=$1 seconds=$2
here="$(cd "$(dirname "$0")" && pwd)"
work=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$work" ]; then
    work=$tmp/corpus
    mkdir -p "$work"
    cp "$here"/trace_seeds/*.h5 "$work"/
    cp "$here"/trace_corpus/* "$work"/ 2>/dev/null || true
fi
# one core; the child's watchdog (GMSIM_TRACE_TIMEOUT, set by the harness)
# is 5 s, so a 30 s timeout means this process itself hung
"$fuzzer" "$work" "$here/trace_seeds" -dict="$here/hdf5.dict" -max_len=65536 \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$PWD/fuzz_trace-" >"$tmp/log" 2>&1
rc=$?
grep -av "^#[0-9]*.*\(NEW\|REDUCE\|pulse\)" "$tmp/log" | tail -40
exit "$rc"
