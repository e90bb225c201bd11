#!/usr/bin/env bash
# Install what gmsim needs to build and test, from Debian's packages.
# Idempotent; run as root (CI and the README's commands do).
set -euo pipefail
pkgs=(build-essential cmake pkg-config
      libhdf5-dev libgsl-dev libcunit1-dev libjansson-dev libbsd-dev libseccomp-dev zlib1g-dev)
if [ "${1:-}" = "--test" ]; then
    # the HTML report test opens the report in a real browser; the fuzz
    # harnesses need clang (libFuzzer)
    pkgs+=(chromium clang libclang-rt-dev)
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
