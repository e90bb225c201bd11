#!/usr/bin/env python3
"""report_drive.py CHROMIUM PAGE.html SHOT.png [--zoom SVG_ID] [--bands] [--segmap] [--oom]
                 [--deep SVG_ID] [--deep-oom SVG_ID] [--tip ID]

Opens a gmsim HTML page in headless chromium through the DevTools protocol
(standard library only: a minimal WebSocket client), and checks it the way a
user would use it:
  - no console error, no uncaught exception, no CSP violation;
  - --zoom ID: a drag across the chart ID zooms every time chart (the plot's
    viewBox narrows, the zoomed axis has ticks, the reset button shows), a
    hover moves the cursor and writes its read-out, the memory charts' y axis
    refits to the zoomed range (new labels), reset restores both;
  - --bands: hovering an allocation band writes its tooltip (size, category,
    call site, lifetime) into the read-out, a click pins it;
  - --deep ID: drags that narrow the range around the peak until the chart
    ID draws its finest zoom level (data-lv), screenshot SHOT-deep.png; the
    charts without finer data then say so instead of drawing; a
    hover there reads the fine level (a time inside the zoomed range);
  - --deep-oom ID: the same around the first OOM (its own windows, the
    finest holding an OOM marker), where the OOM is drawn at its exact time
    inside the view, screenshot SHOT-deep-oom.png;
  - --segmap: the page has a segment map, and hovering its widest block
    writes the block's tooltip (size, category, call site) under the map;
  - --tip ID: hovering an item of the element ID (a point of tune's Pareto
    chart, a row of fit's table) writes its text (the point's <title>, the
    row's data-tip) into the read-out ID-tip;
  - --oom: an OOM's segment map says "request X > largest free gap Y; Z free
    in total" and draws the request against the free memory;
  - saves a full-page screenshot to SHOT.png (and, with --zoom, the zoomed
    chart's viewport to SHOT-zoomed.png) and prints the first-paint and
    load times.
Exits 1 with a message per failed check.
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

fails = []


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    fails.append(msg)


class WS:
    """Just enough of RFC 6455 for the DevTools socket (text frames)."""

    def __init__(self, url):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.split(":")
        self.s = socket.create_connection((host, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(
            (
                "GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            c = self.s.recv(1)
            if not c:
                raise IOError("websocket handshake failed")
            head += c
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise IOError("websocket handshake refused: %r" % head[:80])

    def _read(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise IOError("websocket closed")
            b += c
        return b

    def send(self, text):
        data = text.encode()
        n = len(data)
        hdr = bytes([0x81])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0F
            if op == 0x9:  # ping
                continue
            if op == 0x8:
                raise IOError("websocket closed by chromium")
            msg += payload
            if b0 & 0x80:
                return msg.decode()


class Page:
    def __init__(self, ws):
        self.ws, self.id, self.events = ws, 0, []

    def call(self, method, **params):
        self.id += 1
        self.ws.send(json.dumps({"id": self.id, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            for i, e in enumerate(self.events):
                if e.get("method") == name:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.recv()))
        raise RuntimeError("no %s in %d s" % (name, timeout))

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError("evaluating %s: %s" % (expr[:60], r["exceptionDetails"]))
        return r["result"].get("value")

    def mouse(self, kind, x, y, button="none", clicks=0):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button=button, clickCount=clicks)


def errors(page):
    out = []
    for e in page.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console.error: " + json.dumps(p.get("args", []))[:300])
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log: " + p["entry"].get("text", "")[:300])
    return out


def box(page, sel):
    return page.js(
        "(function(){var e=document.querySelector(%s);if(!e)return null;"
        "e.scrollIntoView({block:'center'});var r=e.getBoundingClientRect();"
        "return [r.left,r.top,r.width,r.height];})()" % json.dumps(sel)
    )


def check_zoom(page, sid, shot=None):
    b = box(page, "#" + sid)
    if not b:
        return fail("no chart #%s" % sid)
    before = page.js("document.querySelector('#%s svg.pz').getAttribute('viewBox')" % sid)
    # the plot spans 72..944 of the 960-unit viewBox
    px = lambda f: b[0] + b[2] * (72 + f * 872) / 960.0
    y = b[1] + b[3] * 0.55
    page.mouse("mouseMoved", px(0.30), y)
    cur = page.js(
        "document.querySelector('#%s g.cur').getAttribute('visibility')+'|'+"
        "document.querySelector('#%s g.cur text').textContent" % (sid, sid)
    )
    if not cur.startswith("visible|t "):
        fail("hover on #%s shows no cursor read-out (%r)" % (sid, cur))
    else:
        print("hover read-out on #%s: %s" % (sid, cur.split("|", 1)[1][:120]))
    page.mouse("mousePressed", px(0.30), y, "left", 1)
    page.mouse("mouseMoved", px(0.45), y, "left")
    page.mouse("mouseMoved", px(0.60), y, "left")
    page.mouse("mouseReleased", px(0.60), y, "left", 1)
    after = page.js("document.querySelector('#%s svg.pz').getAttribute('viewBox')" % sid)
    w0, w1 = float(before.split()[2]), float(after.split()[2])
    if not (abs(w1 / w0 - 0.30) < 0.02):
        fail("drag on #%s: viewBox %r -> %r, expected 30 %% of the width" % (sid, before, after))
    z = page.js(
        "(function(){var n=0,t=[];[].forEach.call(document.querySelectorAll('svg.tl'),"
        "function(s){var p=s.querySelector('svg.pz');if(p&&p.getAttribute('viewBox').split(' ')[2]"
        "<871)n++;});var a=document.querySelector('#%s g.xax1');"
        "[].forEach.call(a.querySelectorAll('text'),function(e){if(e.getAttribute('visibility')"
        "==='visible')t.push(e.textContent);});return [n,document.querySelectorAll('svg.tl')"
        ".length,a.getAttribute('visibility'),t,document.getElementById('zr').hidden];})()" % sid
    )
    n, total, vis, ticks, hidden = z
    if n != total:
        fail("zoom reached %d of %d time charts" % (n, total))
    if vis != "visible" or len(ticks) < 3:
        fail("zoomed axis of #%s: %s, ticks %r" % (sid, vis, ticks))
    if hidden:
        fail("the reset button is hidden while zoomed")
    print("zoomed %d charts; axis %s" % (n, ", ".join(ticks)))
    yf = page.js("[].map.call(document.querySelectorAll('span.yf'),function(e){"
                 "return e.hidden?'':e.textContent;})")
    if yf and not all("fitted to the zoomed range" in t for t in yf):
        fail("zoomed: the legends' y axis text did not follow the refit (%r)" % yf[:2])
    elif yf:
        print("legend: " + yf[0])
    # the memory charts' y axis refits to the zoomed range
    ylab = ("(function(){var s=document.querySelector('svg[data-yr]');if(!s)return null;"
            "var t=function(c){var g=s.querySelector('g.'+c);return [g.getAttribute('visibility')"
            "||'visible',[].filter.call(g.querySelectorAll('text'),function(e){return "
            "e.getAttribute('visibility')!=='hidden';}).map(function(e){return e.textContent;})];};"
            "return [s.id,t('yax0'),t('yax1')];})()")
    y = page.js(ylab)
    if y:
        yid, (v0, t0), (v1, t1) = y
        if v0 != "hidden" or v1 != "visible" or len(t1) < 2 or t1 == t0:
            fail("zoom did not refit the y axis of #%s: written %s %r, refitted %s %r"
                 % (yid, v0, t0, v1, t1))
        else:
            print("y axis of #%s refitted: %s -> %s" % (yid, ", ".join(t0), ", ".join(t1)))
    if shot:  # the zoomed chart, as the user sees it
        page.js("document.getElementById('%s').scrollIntoView({block:'center'})" % sid)
        png = page.call("Page.captureScreenshot", format="png")
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png["data"]))
    page.js("document.getElementById('zr').click()")
    back = page.js("document.querySelector('#%s svg.pz').getAttribute('viewBox')" % sid)
    if back != before:
        fail("reset: viewBox %r, expected %r" % (back, before))
    y = page.js(ylab)
    if y and (y[1][0] != "visible" or y[2][0] != "hidden"):
        fail("reset did not restore the written y axis of #%s" % y[0])
    yf2 = page.js("[].map.call(document.querySelectorAll('span.yf'),function(e){"
                  "return e.hidden?'':e.textContent;})")
    if any("zoomed range" in t for t in yf2 or []):
        fail("reset did not restore the legends' y axis text (%r)" % yf2[:2])


def check_bands(page):
    sid = page.js("(function(){var s=document.querySelector('svg.tl rect.ab');"
                  "return s?s.ownerSVGElement.ownerSVGElement.id:null;})()")
    if not sid:
        return fail("no allocation bands on the page")
    # the band with the largest drawn area (the easiest to hit)
    r = page.js(
        "(function(){var best=null,a=0;[].forEach.call(document.querySelectorAll('#%s rect.ab'),"
        "function(e){var b=e.getBoundingClientRect();if(b.width*b.height>a){a=b.width*b.height;"
        "best=e;}});best.setAttribute('data-probe','1');best.scrollIntoView({block:'center'});"
        "var b=best.getBoundingClientRect();return [b.left+b.width/2,b.top+b.height/2,"
        "best.querySelector('title').textContent];})()" % sid
    )
    x, y, title = r
    page.mouse("mouseMoved", x, y)
    tip = page.js("document.getElementById('%s-tip').textContent" % sid)
    if tip != title:
        fail("hover on a band: read-out %r, expected its title %r" % (tip, title))
    else:
        print("band tooltip: " + tip)
    page.mouse("mousePressed", x, y, "left", 1)
    page.mouse("mouseReleased", x, y, "left", 1)
    pinned = page.js(
        "document.getElementById('%s-tip').textContent+'|'+"
        "document.querySelector('[data-probe]').getAttribute('class')" % sid
    )
    if not pinned.startswith("pinned") or "pin" not in pinned.split("|")[1]:
        fail("click on a band did not pin it (%r)" % pinned)


def check_deep(page, sid, shot=None, group=0):
    """Drags that narrow the range about 8x each, around the peak (group 0,
    the centre of the zoom pyramid) or the first OOM (group 1, its own
    windows), until the fine layer draws single events; then a hover there
    reads the fine level's values (its time lies in the zoomed range, not at
    a 400-column centre)."""
    c = page.js("(function(){var s=document.getElementById('%s'),L=(s.dataset.lv||'')"
                ".split('|').map(function(t){return t.split(';')[0].split(',').map(Number);})"
                ".filter(function(h){return h.length>1&&(h[4]||0)===%d;});if(!L.length)return null;"
                "var l=L[L.length-1];return [(l[0]+l[1])/2,L.length,l[0],l[1]];})()" % (sid, group))
    if not c:
        return fail("#%s has no zoom levels (data-lv) around %s" % (sid, "an OOM" if group else
                                                                     "the peak"))
    centre, levels, w0, w1 = c
    if group:  # the finest window around an OOM holds an OOM marker
        xs = page.js("[].map.call(document.querySelectorAll('#%s g.oom'),function(g){"
                     "return +g.getAttribute('data-x');})" % sid)
        fr = [(x - 72) / 872 for x in xs]
        if not any(w0 - 0.5 / 872 <= f <= w1 + 0.5 / 872 for f in fr):
            fail("#%s: the finest OOM window %.6g..%.6g holds no OOM marker (%r)"
                 % (sid, w0, w1, fr[:5]))
    a, b = 0.0, 1.0
    for _ in range(12):
        bx = box(page, "#" + sid)
        px = lambda f: bx[0] + bx[2] * (72 + f * 872) / 960.0
        y = bx[1] + bx[3] * 0.55
        f = (centre - a) / (b - a)  # the centre, in the zoomed range
        lo, hi = max(0.0, f - 0.06), min(1.0, f + 0.06)
        page.mouse("mousePressed", px(lo), y, "left", 1)
        page.mouse("mouseMoved", px((lo + hi) / 2), y, "left")
        page.mouse("mouseMoved", px(hi), y, "left")
        page.mouse("mouseReleased", px(hi), y, "left", 1)
        vb = page.js("document.querySelector('#%s svg.pz').getAttribute('viewBox')" % sid)
        vb = [float(v) for v in vb.split()]  # the range the page zoomed to (mouse positions
        a, b = (vb[0] - 72) / 872, (vb[0] + vb[2] - 72) / 872  # are whole pixels)
        st = page.js("(function(){var s=document.getElementById('%s'),pf=s.querySelector("
                     "'svg.pf'),vb=pf.getAttribute('viewBox').split(' ');return [pf.getAttribute("
                     "'visibility'),+vb[2],[].filter.call(s.querySelectorAll('g.xax1 text'),"
                     "function(e){return e.getAttribute('visibility')==='visible';}).map("
                     "function(e){return e.textContent;})];})()" % sid)
        if st[0] == "visible" and st[1] < 30:  # under 30 of the finest level's columns
            break
    vis, cols, ticks = st
    if vis != "visible":
        return fail("deep zoom on #%s: the fine layer is not shown" % sid)
    print("deep zoom on #%s around %s (%d levels): %.1f fine columns in view; axis %s"
          % (sid, "the first OOM" if group else "the peak", levels, cols, ", ".join(ticks)))
    # every other time chart zoomed below a pixel of its columns, with no
    # finer level of its own, hides its plot behind a line that says so
    bad = page.js("[].filter.call(document.querySelectorAll('svg.tl'),function(s){"
                  "var pf=s.querySelector('svg.pf');if(pf&&pf.getAttribute('visibility')==='visible')"
                  "return false;var p=s.querySelector('svg.pz'),m=s.querySelector('text.zf');"
                  "return p&&(p.getAttribute('visibility')!=='hidden'||!m||"
                  "m.getAttribute('visibility')!=='visible');}).map(function(s){return s.id;})")
    if bad:
        fail("deep zoom: charts without finer data still draw their stretched columns: %r" % bad)
    if group:  # the OOM drawn at its exact time, inside the zoomed view
        fo = page.js("(function(){var s=document.getElementById('%s'),r=s.getBoundingClientRect();"
                     "return [].filter.call(s.querySelectorAll('g.fo'),function(g){"
                     "return g.getAttribute('visibility')==='visible';}).map(function(g){"
                     "var b=g.querySelector('line').getBoundingClientRect();return [(b.left-r.left)"
                     "/r.width*960,g.querySelector('title').textContent];});})()" % sid)
        inside = [f for f in fo if 72 <= f[0] <= 944]
        if not inside:
            fail("deep zoom on #%s at an OOM: no OOM marker in the view (%r)" % (sid, fo[:3]))
        else:
            print("OOM marker at x=%.1f: %s" % tuple(inside[0]))
    # the cursor reads the fine level: a time inside the zoomed range
    bx = box(page, "#" + sid)
    page.mouse("mouseMoved", bx[0] + bx[2] * (72 + 0.5 * 872) / 960.0, bx[1] + bx[3] * 0.55)
    ro = page.js("(function(){var s=document.getElementById('%s');return [s.querySelector("
                 "'g.cur text').textContent,+s.dataset.tc];})()" % sid)
    import re
    m = re.match(r"t ([0-9.e+-]+) ", ro[0] or "")
    if not m:
        fail("deep zoom on #%s: no cursor read-out (%r)" % (sid, ro[0]))
    else:
        t = float(m.group(1)) / (400 * ro[1])  # as a fraction of the span
        if not (a - (b - a) <= t <= b + (b - a)):
            fail("deep zoom on #%s: the read-out's time %r is not in the zoomed range %.9g..%.9g"
                 " (the 400 columns' value, not the fine level's)" % (sid, ro[0], a, b))
        else:
            print("fine read-out: " + ro[0])
    page.mouse("mouseMoved", 1, 1)
    if shot:
        page.js("document.getElementById('%s').scrollIntoView({block:'center'})" % sid)
        png = page.call("Page.captureScreenshot", format="png")
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png["data"]))
    page.js("document.getElementById('zr').click()")
    if page.js("document.querySelector('#%s svg.pf').getAttribute('visibility')" % sid) != "hidden":
        fail("reset did not hide the fine layer of #%s" % sid)


def check_segmap(page):
    r = page.js(
        "(function(){var s=document.querySelector('svg.segmap');if(!s)return null;"
        "var dt=s.closest('details');if(dt&&!dt.open)dt.querySelector('summary').click();"
        "var best=null,a=0;[].forEach.call(s.querySelectorAll('rect.sb'),function(e){"
        "if(!/\\bk\\d\\b/.test(e.getAttribute('class')))return;"
        "var b=e.getBoundingClientRect();if(b.width*b.height>a){a=b.width*b.height;best=e;}});"
        "if(!best)return [s.id];best.scrollIntoView({block:'center'});"
        "var b=best.getBoundingClientRect();return [s.id,b.left+b.width/2,b.top+b.height/2,"
        "best.querySelector('title').textContent,s.querySelectorAll('rect.sb').length];})()"
    )
    if not r:
        return fail("no segment map (svg.segmap) on the page")
    if len(r) < 5:
        return fail("segment map #%s has no block" % r[0])
    sid, x, y, title, n = r
    page.mouse("mouseMoved", x, y)
    tip = page.js("document.getElementById('%s-tip').textContent" % sid)
    if tip != title or " block (" not in tip:
        fail("hover on a segment map block: read-out %r, expected its title %r" % (tip, title))
    else:
        print("segment map #%s (%d items): %s" % (sid, n, tip))


def check_tip(page, eid):
    r = page.js(
        "(function(){var s=document.getElementById('%s');if(!s)return null;"
        "var it=[].filter.call(s.querySelectorAll('*'),function(e){return e.hasAttribute("
        "'data-tip')||(e!==s&&e.querySelector(':scope>title'));});"
        "if(!it.length)return [];s.scrollIntoView({block:'center'});"
        # an item on top at the point hovered (Pareto points overlap)
        "for(var i=it.length>1?1:0;i<it.length;i++){var e=it[i],b=e.getBoundingClientRect(),"
        "x=b.left+Math.min(b.width/2,20),y=b.top+b.height/2,h=document.elementFromPoint(x,y);"
        "if(h!==e&&!(h&&e.contains(h)))continue;var t=e.getAttribute('data-tip');"
        "if(t===null)t=e.querySelector(':scope>title').textContent;return [x,y,t,it.length];}"
        "return [];})()" % eid
    )
    if r is None:
        return fail("no element #%s on the page" % eid)
    if not r:
        return fail("#%s has nothing to hover (no <title> or data-tip)" % eid)
    x, y, want, n = r
    page.mouse("mouseMoved", x, y)
    got = page.js("document.getElementById('%s-tip').textContent" % eid)
    if got != want or not want:
        fail("hover in #%s: read-out %r, expected %r" % (eid, got, want))
    else:
        print("#%s (%d items): %s" % (eid, n, got))


def check_oom(page):
    r = page.js(
        "(function(){var v=[].map.call(document.querySelectorAll('details.segm .oomv'),"
        "function(e){return e.textContent;});return [v,document.querySelectorAll("
        "'svg.sbars rect.sq').length];})()"
    )
    texts, bars = r
    import re
    ok = [t for t in texts if re.match(r"request [0-9.]+ [KMG]?i?B( \(block [^)]*\))? > largest "
                                        r"free gap [0-9.]+ [KMG]?i?B; [0-9.]+ [KMG]?i?B free in "
                                        r"total$", t)]
    if not ok:
        fail("no OOM segment map says 'request X > largest free gap Y; Z free in total' (%r)"
             % texts[:3])
    elif bars < 1:
        fail("no request bar drawn against the free memory")
    else:
        print("OOM map: %s (%d OOM maps)" % (ok[0], len(texts)))


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    chromium, html, shot = args[:3]
    zoom = args[args.index("--zoom") + 1] if "--zoom" in args else None
    profile = tempfile.mkdtemp()
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--window-size=1280,1000", "--user-data-dir=" + profile,
         "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        for _ in range(300):
            if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                break
            time.sleep(0.1)
        port = open(port_file).read().split()[0]
        targets = json.load(urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port))
        url = [t for t in targets if t.get("type") == "page"][0]["webSocketDebuggerUrl"]
        page = Page(WS(url))
        for d in ("Runtime.enable", "Log.enable", "Page.enable"):
            page.call(d)
        page.call("Page.setLifecycleEventsEnabled", enabled=True)
        t0 = time.time()
        nav = page.call("Page.navigate", url="file://" + os.path.abspath(html))
        page.wait_event("Page.loadEventFired")
        wall = (time.time() - t0) * 1000
        fp = -1
        try:  # chromium's own lifecycle times: navigation start to first contentful paint
            marks = {}
            while "firstContentfulPaint" not in marks:
                e = page.wait_event("Page.lifecycleEvent", 10)
                if e["params"].get("loaderId") != nav.get("loaderId"):
                    continue
                marks.setdefault(e["params"]["name"], e["params"]["timestamp"])
            fp = (marks["firstContentfulPaint"] - marks.get("init", marks["firstContentfulPaint"])) * 1000
        except RuntimeError:
            fail("no first contentful paint reported")
        print("%s: %d bytes, first contentful paint %.0f ms, loaded in %.0f ms" %
              (os.path.basename(html), os.path.getsize(html), fp, wall))
        if not page.js("document.documentElement.className.indexOf('js')>=0"):
            fail("the page's script did not run")
        if zoom:
            check_zoom(page, zoom, shot[:-4] + "-zoomed.png" if shot.endswith(".png") else None)
        if "--bands" in args:
            check_bands(page)
        if "--segmap" in args:
            check_segmap(page)
        if "--deep" in args:
            check_deep(page, args[args.index("--deep") + 1],
                       shot[:-4] + "-deep.png" if shot.endswith(".png") else None)
        if "--deep-oom" in args:
            check_deep(page, args[args.index("--deep-oom") + 1],
                       shot[:-4] + "-deep-oom.png" if shot.endswith(".png") else None, group=1)
        if "--oom" in args:
            check_oom(page)
        if "--tip" in args:
            check_tip(page, args[args.index("--tip") + 1])
        page.js("window.scrollTo(0,0)")
        png = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png["data"]))
        time.sleep(0.2)
        page.call("Runtime.evaluate", expression="1")  # drain late events
        for e in errors(page):
            fail("%s: %s" % (os.path.basename(html), e))
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
        shutil.rmtree(profile, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
