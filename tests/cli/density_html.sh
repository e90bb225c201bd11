#!/usr/bin/env bash
# gmsim fit --tenants ... --html in density mode (reports/html_density.c):
# one row per scheduling mode with the JSON's figures, names escaped, the
# CSP of the other pages, nothing fetched from outside; gmsim report draws
# the same table from the JSON. Usage: density_html.sh GMSIM SOURCE_DIR
set -u
gmsim=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 total=0
ok() { total=$((total + 1)); echo "ok   $1"; }
bad() { total=$((total + 1)); fails=$((fails + 1)); echo "FAIL $1"; }
evil="$tmp/a<b>&\"c.h5"
cp "$src/traces/bert.h5" "$evil"
if "$gmsim" fit -q --tenants 4 --capacity 24GiB --class guaranteed --request 6Gi "$evil" \
    --class burstable --request 2Gi --limit 8Gi "$src/traces/gpt2.h5" \
    --html "$tmp/d.html" --json "$tmp/d.json" >"$tmp/out" 2>&1; then
    ok "fit --tenants --html in density mode runs"
else
    bad "fit --tenants --html: exit $?"; cat "$tmp/out"
fi
if python3 - "$tmp/d.html" "$tmp/d.json" <<'PY'
import html.parser, json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
doc = json.load(open(sys.argv[2]))
assert doc["mode"] == "density" and doc["protected"] == "guaranteed tenants"
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.rows = []; self.cell = None; self.srcs = []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr": self.rows.append([])
        if tag in ("td", "th"): self.cell = ""
        for k in ("src", "href"):
            if k in a and not a[k].startswith(("#", "data:")): self.srcs.append(a[k])
    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip()); self.cell = None
    def handle_data(self, d):
        if self.cell is not None: self.cell += d
p = P(); p.feed(page)
assert not p.srcs, p.srcs
head, body = p.rows[0], p.rows[1:]
assert head[:6] == ["mode", "copies of the mix", "jobs", "slowdown", "utilization", "other OOMs"], head
res = doc["results"]
assert len(body) == len(res) == 4
for row, r in zip(body, res):
    assert row[0] == r["label"], (row, r["label"])
    assert row[2] == str(r["jobs"]), (row, r["jobs"])
    if r["jobs"]:
        assert row[3] == "%.1f %%" % (100 * r["slowdown"]), row
        assert row[4] == "%.1f %%" % (100 * r["utilization"]), row
    assert row[5] == str(r["other_ooms"])
    assert row[1] == ("\u2014" if r["mode"] == "one-per-gpu" else str(r["copies_fit"]))
assert "Content-Security-Policy" in page and "default-src 'none'" in page
# the trace name escaped: no raw tag from it, the escaped form present
assert "a<b>" not in page and "a&lt;b&gt;&amp;" in page
best = max(r["jobs"] for r in res)
assert re.search(r"densest mode: [^<]*, %d jobs? per GPU" % best, page), "verdict"
PY
then ok "rows match the JSON, escaped, CSP, self-contained"; else bad "the page's table"; fi
if "$gmsim" report "$tmp/d.json" -o "$tmp/r.html" >/dev/null 2>&1 &&
    grep -q "Per scheduling mode" "$tmp/r.html"; then
    ok "gmsim report draws the density page from the JSON"
else
    bad "gmsim report of a density JSON"
fi
echo "$((total - fails)) passed, $fails failed"
[ "$fails" = 0 ]
