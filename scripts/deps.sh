#!/usr/bin/env bash
# Install what gmsim needs to build and test, from Debian's packages.
# Idempotent; run as root (CI and the README's commands do).
set -euo pipefail
# Open MPI is optional for the build (gmsim sweep then runs on threads only)
# but the test suite needs it: tests/cli/sweep_mpi.sh fails without it.
pkgs=(build-essential cmake pkg-config
      libhdf5-dev libgsl-dev libfftw3-dev libcunit1-dev libjansson-dev libbsd-dev libseccomp-dev zlib1g-dev
      libopenmpi-dev openmpi-bin)
if [ "${1:-}" = "--test" ]; then
    # the HTML report test opens the report in a real browser; the compare,
    # sweep and RMM replay tests read the JSON results with python3; the fuzz
    # harnesses need clang (libFuzzer)
    pkgs+=(chromium python3 clang libclang-rt-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "gmsim: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
