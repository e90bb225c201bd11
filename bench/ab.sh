#!/usr/bin/env bash
# Two builds' gmbench figures, measured the way this 2-core shared machine
# allows: rounds alternated (old, new, old, new, ...), and each figure
# given as a median and as the median of each round's new/old (a pair runs
# seconds apart, so the load of other processes cancels in part). Not a
# test: prints figures.
#
# usage: bench/ab.sh ROUNDS OLD_BUILD NEW_BUILD GMBENCH_ARGS... [/ GMBENCH_ARGS...]
#   bench/ab.sh 7 /tmp/old build-rel mem 5e6
#   bench/ab.sh 7 /tmp/old build-rel cached 1000000 4e6 / cached 0 4e6
# With a second set of arguments after '/', each build's figure is the
# first run over the second in the same round (a ratio such as 1 M cached
# blocks against none), and the pair is new ratio / old ratio.
#
# The figure read from gmbench is its "ns per event" (modes mem, file,
# tenants, cached). Two builds of the same code read up to ±8 % apart in
# 6 rounds on this machine: a difference smaller than that is not one.
set -euo pipefail
if [ $# -lt 4 ]; then
    sed -n '2,/^set/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
rounds=$1 old=$2 new=$3
shift 3
first=() second=()
while [ $# -gt 0 ] && [ "$1" != / ]; do first+=("$1"); shift; done
[ $# -gt 0 ] && shift && second=("$@")
for b in "$old" "$new"; do
    [ -x "$b/bench/gmbench" ] || { echo "ab.sh: no $b/bench/gmbench; build it first" >&2; exit 2; }
done
ns() { # build args...: gmbench's ns per event
    local b=$1
    shift
    "$b/bench/gmbench" "$@" | grep -o '[0-9.]* ns per event' | cut -d' ' -f1
}
figure() { # build: one round's figure
    local x
    x=$(ns "$1" "${first[@]}")
    if [ ${#second[@]} -gt 0 ]; then
        awk -v a="$x" -v b="$(ns "$1" "${second[@]}")" 'BEGIN { printf "%.4f\n", a / b }'
    else
        echo "$x"
    fi
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for ((i = 0; i < rounds; i++)); do
    echo "$(figure "$old") $(figure "$new")" >>"$tmp"
done
what="ns per event"
[ ${#second[@]} -gt 0 ] && what="ratio (${first[*]}) / (${second[*]})"
echo "gmbench ${first[*]}${second:+ / ${second[*]}}: $what, $rounds alternated rounds"
echo "  old $old: median $(cut -d' ' -f1 "$tmp" | median), min $(cut -d' ' -f1 "$tmp" | sort -g | head -1)"
echo "  new $new: median $(cut -d' ' -f2 "$tmp" | median), min $(cut -d' ' -f2 "$tmp" | sort -g | head -1)"
echo "  new / old, median of the rounds' pairs: $(awk '{ printf "%.4f\n", $2 / $1 }' "$tmp" | median)"
