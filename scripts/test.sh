#!/usr/bin/env bash
# Install dependencies, build, and run the whole test suite twice: a normal
# build, then one under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --test
jobs="$(nproc)"
for kind in plain asan; do
    dir=build
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
    if [ "$kind" = asan ]; then
        dir=build-asan
        flags+=(-DGM_SANITIZE=ON)
    fi
    echo "== $kind build ($dir)"
    cmake -S . -B "$dir" "${flags[@]}" >/dev/null
    cmake --build "$dir" -j"$jobs" >/dev/null
    (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs")
done
