#!/usr/bin/env bash
# scale-validate.sh [GMSIM] - how well `gmsim scale` predicts a recording
# from others: for each case, traces are generated at three values of a
# dimension and at a fourth; the fourth is predicted from the first two
# (a line) and from all three (a parabola) and compared with the generated
# one: peak live bytes (gmsim info) and peak reserved bytes (gmsim run, the
# pytorch allocator model, 80 GiB). Prints the table README.md quotes.
# Takes about a minute on two cores.
set -euo pipefail
gmsim=${1:-build/gmsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

live() { "$gmsim" info --json - "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_live_bytes"])'; }
reserved() {
    "$gmsim" run --capacity 80GiB --json "$tmp/r.json" "$1" >/dev/null
    grep -m1 '"peak_reserved_bytes"' "$tmp/r.json" | sed 's/[^0-9]//g'
}
err() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+7.2f%%", 100 * (b - a) / a }'; }

# case NAME "gen args with VAR" V1 V2 V3 TARGET
case1() {
    local name=$1 args=$2 v1=$3 v2=$4 v3=$5 to=$6
    for v in "$v1" "$v2" "$v3" "$to"; do
        "$gmsim" gen ${args//VAR/$v} -o "$tmp/v$v.h5" >/dev/null
    done
    "$gmsim" scale "$tmp/v$v1.h5=$v1" "$tmp/v$v2.h5=$v2" --to "$to" -o "$tmp/p2.h5" >/dev/null
    "$gmsim" scale "$tmp/v$v1.h5=$v1" "$tmp/v$v2.h5=$v2" "$tmp/v$v3.h5=$v3" --to "$to" \
        -o "$tmp/p3.h5" >/dev/null
    local l r
    l=$(live "$tmp/v$to.h5")
    r=$(reserved "$tmp/v$to.h5")
    printf "| %-44s | %s | %s | %s | %s |\n" "$name" "$(err "$l" "$(live "$tmp/p2.h5")")" \
        "$(err "$l" "$(live "$tmp/p3.h5")")" "$(err "$r" "$(reserved "$tmp/p2.h5")")" \
        "$(err "$r" "$(reserved "$tmp/p3.h5")")"
    rm -f "$tmp"/v*.h5 "$tmp"/p*.h5
}

echo "| case (recordings -> predicted) | live, 2 | live, 3 | reserved, 2 | reserved, 3 |"
echo "|---|---|---|---|---|"
case1 "gpt2 bf16, batch 4, 8 (16) -> 12" \
    "gpt --model gpt2 --dtype bf16 --batch VAR --seq 512 --iterations 2" 4 8 16 12
case1 "resnet50, batch 16, 32 (64) -> 48" "resnet50 --batch VAR --iterations 2" 16 32 64 48
case1 "llama2-7b bf16 ckpt, batch 1, 2 (4) -> 3" \
    "llama --model llama2-7b --dtype bf16 --seq 2048 --batch VAR --checkpoint 1 --iterations 2" \
    1 2 4 3
case1 "gpt2 eager, seq 256, 512 (1024) -> 768" \
    "gpt --model gpt2 --attention eager --batch 2 --seq VAR --iterations 2" 256 512 1024 768
case1 "gpt2 eager, seq 256, 512 (768) -> 1024" \
    "gpt --model gpt2 --attention eager --batch 2 --seq VAR --iterations 2" 256 512 768 1024
case1 "tinyllama bf16 eager, seq 512, 1024 (2048) -> 1536" \
    "llama --model tinyllama-1.1b --dtype bf16 --attention eager --batch 1 --seq VAR --iterations 2" \
    512 1024 2048 1536
case1 "resnet50, resolution 160, 200 (256) -> 224" \
    "resnet50 --batch 32 --resolution VAR --iterations 2" 160 200 256 224
case1 "bert (seq jitter), seq 96, 128 (192) -> 160" \
    "bert --seq VAR --batch 16 --iterations 4" 96 128 192 160
case1 "bert (seq jitter), seq 64, 96 (128) -> 192" \
    "bert --seq VAR --batch 16 --iterations 4" 64 96 128 192
