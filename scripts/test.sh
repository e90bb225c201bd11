#!/usr/bin/env bash
# Install dependencies, check the layering (scripts/check-layers.sh), then
# build with gcc and run the whole test suite three times: a Release build
# (-O3), a RelWithDebInfo build (-O2 -g), and RelWithDebInfo under
# AddressSanitizer + UBSan; then the fuzz harnesses with clang. Every build treats warnings as errors
# (CMakeLists.txt: -Wall -Wextra -Werror).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --test
bash scripts/check-layers.sh
jobs="$(nproc)"
for kind in release plain asan; do
    case "$kind" in
    release) dir=build-release flags=(-DCMAKE_BUILD_TYPE=Release) ;;
    plain) dir=build flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
    asan) dir=build-asan flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_SANITIZE=ON) ;;
    esac
    echo "== $kind build ($dir)"
    cmake -S . -B "$dir" -DCMAKE_C_COMPILER=gcc "${flags[@]}" >/dev/null
    cmake --build "$dir" -j"$jobs" >/dev/null
    (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs")
done
# The trace reader's libFuzzer harness needs clang (tests/fuzz/README.md):
# its seeds, kept corpus and the hostile files once each, then a bounded
# 60 s fuzzing run that fails on a crash, a hang or a memory blow-up.
echo "== fuzz_trace (clang, build-fuzz)"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_trace fuzz_import fuzz_unpickle >/dev/null
# and the importer's and unpickler's harnesses over their seeds (seconds)
(cd build-fuzz && ctest --output-on-failure -R '^fuzz_(trace|import_seeds|unpickle_seeds)')
