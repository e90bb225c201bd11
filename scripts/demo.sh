#!/usr/bin/env bash
# Install dependencies, build, and run the main job on the shipped sample
# trace: gmsim run --policy pytorch traces/bert.h5
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
./build/gmsim run --policy pytorch traces/bert.h5 --json build/bert-result.json
echo
echo "JSON results: build/bert-result.json"
