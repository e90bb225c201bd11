#!/usr/bin/env bash
# check-layers.sh - every #include "..." points down the layers, never up or
# sideways. Run by scripts/test.sh; exit 1 with one line per offending
# include. The layers, lowest first (each may include itself and those
# before it):
#
#   base  traces  sim  policies  study  reports  cli
#
# Beside them: capture/ sits on traces; replay/ and bench/ on reports (not
# cli); tests may include anything. An include is resolved as the compiler
# does (the including file's folder, then the repository root), and "../"
# is refused outright, so that a path cannot hide where it leads. The build
# enforces the same from the other side: each layer compiles with only the
# folders below it on its include path (CMakeLists.txt, gm_layer).
set -euo pipefail
cd "$(dirname "$0")/.."

layers=(base traces sim policies study reports cli)

# The folders a file in folder $1 may include from.
allowed() {
    local top=$1 out="" l
    case "$top" in
    capture) echo "base traces capture" ;;
    replay | bench) echo "base traces sim policies study reports $top" ;;
    tests) echo "*" ;;
    *)
        for l in "${layers[@]}"; do
            out="$out $l"
            [ "$l" = "$top" ] && break
        done
        echo "$out" ;;
    esac
}

status=0
n=0
while IFS= read -r file; do
    dir=$(dirname "$file")
    top=${file%%/*}
    case "$file" in */tests/* | tests/*) top=tests ;; esac
    ok=$(allowed "$top")
    while IFS= read -r line; do
        inc=${line#*\"}
        inc=${inc%%\"*}
        n=$((n + 1))
        if [[ "$inc" == ../* || "$inc" == */../* ]]; then
            echo "$file: #include \"$inc\": no ../ in includes; name the file from the repository root"
            status=1
            continue
        fi
        if [ -e "$dir/$inc" ]; then
            target="$dir/$inc"
        elif [ -e "$inc" ]; then
            target=$inc
        else
            continue # not ours (a system or test-local header)
        fi
        to=${target#./}
        to=${to%%/*}
        [ "$ok" = "*" ] && continue
        case " $ok " in
        *" $to "*) ;;
        *)
            echo "$file: #include \"$inc\": $top/ may not include $to/ (it may include:$ok)"
            status=1
            ;;
        esac
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(git ls-files '*.c' '*.h' '*.cu')

if [ $status = 0 ]; then
    echo "check-layers: $n includes, none against the layering"
fi
exit $status
