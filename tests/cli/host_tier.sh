#!/usr/bin/env bash
# --host-tier and --on-oom chain from the command line (sim/host_tier.h):
# bad values refused, OOMs resolved on bert.h5, the figures in the JSON
# consistent with the link's bandwidth. Usage: host_tier.sh GMSIM SOURCE_DIR
set -u
gmsim=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 total=0
check() { # check NAME EXPECTED_RC PATTERN -- CMD...
    local name=$1 want=$2 pat=$3
    shift 4
    total=$((total + 1))
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" != "$want" ]; then
        echo "FAIL $name: exit $rc, expected $want"; cat "$tmp/err"; fails=$((fails + 1)); return
    fi
    if [ -n "$pat" ] && ! grep -qE -- "$pat" "$tmp/out" "$tmp/err"; then
        echo "FAIL $name: output lacks /$pat/"; cat "$tmp/out" "$tmp/err"; fails=$((fails + 1)); return
    fi
    echo "ok   $name"
}
bert=$src/traces/bert.h5
for bad in pcie3 0GB/s fastGB/s pcie4,size=0 pcie4,touch=maybe pcie4,speed=1 ""; do
    check "bad --host-tier '$bad'" 2 "--host-tier: .*(give pcie4, pcie5, c2c|size=64GiB)" -- \
        "$gmsim" run --host-tier "$bad" "$bert"
done
check "bad --on-oom names chain" 2 "'abort', 'skip' or 'chain'" -- "$gmsim" run --on-oom maybe "$bert"
check "4 GiB OOMs without a host tier" 3 "OOM" -- "$gmsim" run -q --capacity 4GiB "$bert"
check "4 GiB fits with pcie4" 0 "[1-9][0-9]* OOMs? resolved by spilling" -- \
    "$gmsim" run --capacity 4GiB --host-tier pcie4 "$bert" --json "$tmp/p4.json"
check "pcie5" 0 "host tier +pcie5, 50.0 GB/s" -- \
    "$gmsim" run --capacity 4GiB --host-tier pcie5 "$bert" --json "$tmp/p5.json"
check "3 GiB, touch=none" 0 "" -- \
    "$gmsim" run --capacity 3GiB --host-tier 10GB/s,touch=none "$bert" --json "$tmp/none.json"
check "3 GiB, touch=free" 0 "" -- \
    "$gmsim" run --capacity 3GiB --host-tier 10GB/s "$bert" --json "$tmp/free.json"
check "chain at 3 GiB: degraded, marked" 0 "DEGRADED: [0-9]+ activation" -- \
    "$gmsim" run --capacity 3GiB --on-oom chain "$bert" --json "$tmp/chain.json"
check "chain line" 0 "OOM chain: [0-9]+ OOMs: release [0-9]+ \([0-9.]+ %\), degrade" -- \
    "$gmsim" run --capacity 3GiB --on-oom chain "$bert"
total=$((total + 1))
if python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
def t(name):
    r = json.load(open(f"{d}/{name}.json"))
    return r, r["tenants"][0]
r4, a = t("p4"); r5, b = t("p5")
h4, h5 = a["host_tier"], b["host_tier"]
assert r4["inputs"]["host_tier"]["link"] == "pcie4" and r4["inputs"]["host_tier"]["bytes_per_s"] == 25e9
assert h4["spills"] > 0 and h4["ooms_resolved_by_spill"] > 0
# the decisions do not depend on the bandwidth: the same bytes, half the time on Gen5
assert h4["spill_bytes"] == h5["spill_bytes"] and h4["spills"] == h5["spills"]
assert abs(h4["spill_stall_ns"] - h4["spill_bytes"] / 25) <= h4["spills"]
assert abs(2 * h5["spill_stall_ns"] - h4["spill_stall_ns"]) <= 2 * h4["spills"]
assert h4["stall_ns"] == h4["spill_stall_ns"] + h4["fetch_stall_ns"]
_, n = t("none"); _, f = t("free")
assert n["host_tier"]["fetches"] == 0 and n["host_tier"]["drops"] > 0
assert f["host_tier"]["fetches"] > 0 and f["host_tier"]["drops"] == 0
assert abs(f["host_tier"]["fetch_stall_ns"] - f["host_tier"]["fetch_bytes"] / 10) <= f["host_tier"]["fetches"]
rc, c = t("chain")
assert rc["inputs"]["on_oom"] == "chain" and rc["inputs"]["host_tier"]["link"] == "pcie4"
ch = c["oom_chain"]
assert ch["ooms"] == ch["resolved_by_release"] + ch["resolved_by_degrade"] + ch["resolved_by_offload"] + ch["unresolved"]
assert abs(ch["release_rate"] + ch["degrade_rate"] + ch["offload_rate"] + ch["unresolved_rate"] - 1) < 1e-9
assert ch["degraded"] is True and ch["resolved_by_degrade"] > 0 and ch["degraded_bytes"] > 0
assert c["host_tier"]["ooms_resolved_by_spill"] == ch["resolved_by_offload"]
PY
then
    echo "ok   JSON: bytes, stall and rates consistent"
else
    echo "FAIL JSON: bytes, stall and rates"; fails=$((fails + 1))
fi
echo "$((total - fails)) passed, $fails failed"
[ "$fails" = 0 ]
