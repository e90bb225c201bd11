/*
 * html.c - the report page: head (CSS, CSP), header with the verdict and
 * what was run, the ranked comparison table, the overlay chart, one card per
 * run, the trace statistics, definitions, and the hover script. See html.h.
 *
 * Order of the page follows the questions a reader has: who won and by how
 * much (verdict, table), how the runs differ over time (overlay, cards),
 * what the workload is (trace statistics), and how to reproduce it
 * (inputs, commands). Every string that came from a trace or a result goes
 * through gm_sb_esc; the script and the style sheet are constants.
 */
#include "html.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "html_int.h"
#include "kv.h"
#include "base/hash.h"
#include "base/outfile.h"
#include "base/units.h"
#include "base/version.h"

#define MAX_TRACES 64
#define MAX_OOM_ROWS 10

static const char css[] =
    ":root{--fg:#1f2933;--mut:#5f6b7a;--line:#e4e7eb;--soft:#f5f7fa;--win:#e6f6ea;"
    "--winb:#2f9e4f;--bad:#c53030}"
    "*{box-sizing:border-box}"
    "body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',"
    "'DejaVu Sans',Arial,sans-serif;color:var(--fg);background:#eef0f3}"
    "main{max-width:1100px;margin:0 auto;padding:26px 32px 40px;background:#fff;"
    "box-shadow:0 0 0 1px #dde1e6}"
    "h1{font-size:23px;margin:0 0 2px;font-weight:650}h1 code{font-size:21px}"
    "h2{font-size:17px;margin:34px 0 10px;padding-bottom:5px;border-bottom:1px solid var(--line)}"
    "h3{font-size:15.5px;margin:0 0 4px}"
    ".sub{color:var(--mut);margin:0}"
    ".verdict{margin:16px 0 6px;padding:12px 16px;border-left:4px solid var(--winb);"
    "background:var(--win);border-radius:4px;font-size:14.5px}"
    ".verdict.warn{border-color:var(--bad);background:#fdf0f0}"
    ".verdict p{margin:2px 0}"
    "code,.mono{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;"
    "font-size:12.5px}"
    "table{border-collapse:collapse;width:100%;margin:4px 0}"
    "th,td{padding:5px 8px;text-align:right;border-bottom:1px solid var(--line);"
    "white-space:nowrap;font-variant-numeric:tabular-nums}"
    "th{font-weight:600;color:var(--mut);font-size:12px;border-bottom:2px solid #cfd5dc;"
    "vertical-align:bottom;white-space:normal;line-height:1.25}"
    "td.l,th.l{text-align:left}td.wrap,td.pol{white-space:normal;overflow-wrap:anywhere}"
    "tr.win td{background:var(--win);font-weight:600}"
    "tr.win td:first-child{box-shadow:inset 4px 0 var(--winb)}"
    "tr.bound td{color:var(--mut);font-style:italic;"
    "background:repeating-linear-gradient(135deg,#fff 0 6px,#f3f4f6 6px 12px)}"
    "tr.limit td{color:var(--mut);background:#fafbfc}"
    "tr.ref td{border-top:2px solid #cfd5dc}"
    ".badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:11px;font-weight:600;"
    "vertical-align:1px;margin-left:6px;font-style:normal}"
    ".badge.win{background:var(--winb);color:#fff}"
    ".badge.bound{background:#e4e7eb;color:#3e4c59}"
    ".badge.oom{background:#fde2e2;color:var(--bad)}"
    ".badge.ok{background:#e3f2e6;color:#22753a}"
    ".sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}"
    ".bar{position:relative;display:inline-block;width:64px;height:8px;background:#eef1f4;"
    "border-radius:2px;margin-left:8px}"
    ".bar i{position:absolute;left:0;top:0;bottom:0;background:#f0a35e;border-radius:2px}"
    ".bar b{position:absolute;top:-3px;bottom:-3px;width:2px;background:#1f2933}"
    ".bar.c i{background:#7aa7d9}"
    "svg.chart{display:block;width:100%;height:auto;margin:2px 0}"
    "svg text{font-size:11px;font-family:system-ui,'DejaVu Sans',Arial,sans-serif;fill:#52606d}"
    ".grid{stroke:#eceef1}.axis,.tick{stroke:#9aa5b1}"
    ".s-r{fill:none;stroke:#dd6b20;stroke-width:1.5}"
    ".s-r.area{fill:#fbd38d;fill-opacity:.5;stroke:none}"
    ".s-a{fill:none;stroke:#2b6cb0;stroke-width:1.4}"
    ".s-q{fill:none;stroke:#1a202c;stroke-width:1.1}.s-q.lo{stroke-width:.8;stroke-opacity:.7}"
    ".s-a.band{fill:#2b6cb0;fill-opacity:.16;stroke:none}"
    ".s-q.band{fill:#1a202c;fill-opacity:.14;stroke:none}"
    ".s-f{fill:none;stroke:#6b46c1;stroke-width:1.2}"
    ".s-f.area{fill:#d6bcfa;fill-opacity:.45;stroke:none}"
    ".s-u{fill:none;stroke:#8795a1;stroke-width:1.1;stroke-dasharray:3 2}"
    ".s-qa.area{fill:#d5dae0;fill-opacity:.6;stroke:none}"
    ".ov{fill:none;stroke-width:1.6;stroke-linejoin:round}.ov.win{stroke-width:3}"
    ".ov.bound{stroke-dasharray:6 3}"
    "line.limit{stroke:#1a202c;stroke-dasharray:2 3}text.limit{fill:#1a202c}"
    "line.cap{stroke:#c53030;stroke-dasharray:7 4;stroke-width:1.3}text.cap{fill:#c53030}"
    "text.lbl{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}"
    ".oom line,.fo line{stroke:#c53030;stroke-opacity:.35}.oom path,.fo path{fill:#c53030}"
    ".band{fill:#fafbfc;stroke:#e4e7eb}.band-l{font-weight:600;fill:#3e4c59;"
    "paint-order:stroke;stroke:#fafbfc;stroke-width:3px}"
    ".abort{stroke:#c53030;stroke-width:2}"
    ".cur line{stroke:#1f2933;stroke-width:1;stroke-opacity:.7}"
    ".ro{font-weight:600;fill:#1f2933;paint-order:stroke;stroke:#fff;stroke-width:4px;"
    "stroke-linejoin:round}"
    ".tt rect,.hit{fill:#000;fill-opacity:0}.bar:hover .hit{fill-opacity:.04}"
    ".h-n{fill:#2b6cb0}.h-b{fill:#dd6b20}"
    ".iter .pt{fill:#0072b2}.iter .rng{stroke:#0072b2;stroke-width:3;stroke-linecap:round}.iter "
    ".pt.warm{fill:#fff;stroke:#0072b2;stroke-width:1.5}"
    ".iter .fit{stroke:#d55e00;stroke-width:2;stroke-dasharray:6 4}"
    ".legend{display:flex;flex-wrap:wrap;gap:3px 16px;font-size:12.5px;color:var(--mut);"
    "margin:10px 0 0}"
    "b.lv{color:var(--fg);font-variant-numeric:tabular-nums}"
    ".key{display:inline-block;width:18px;height:0;border-top:2px solid;vertical-align:middle;"
    "margin-right:6px}"
    ".key.fill{height:9px;border:0;border-radius:2px}"
    ".key.dash{border-top-style:dashed}.key.dot{border-top-style:dotted}"
    ".run{border:1px solid var(--line);border-radius:8px;padding:14px 18px 10px;margin:18px 0}"
    ".run.win{border-color:var(--winb);box-shadow:0 0 0 1px var(--winb)}"
    ".run.bound{background:#fcfcfd}"
    ".kpis{display:flex;flex-wrap:wrap;gap:4px 20px;margin:2px 0;font-size:13px;color:var(--mut)}"
    ".kpis b{color:var(--fg);font-weight:600}"
    ".rank{color:var(--mut);font-weight:600;margin-right:6px}"
    "dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:3px 18px;margin:6px 0}"
    "dl.kv dt{color:var(--mut)}dl.kv dd{margin:0;overflow-wrap:anywhere}"
    "dl.kv.pr{grid-template-columns:repeat(2,minmax(0,max-content) minmax(10em,1fr));"
    "font-size:13px}dl.kv.pr dt{overflow-wrap:anywhere}"
    "h4{margin:12px 0 2px;font-size:13.5px}"
    ".note{color:var(--mut);font-size:12.5px;margin:4px 0}"
    "details{margin:8px 0}summary{cursor:pointer;color:#2b6cb0}"
    "pre{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);padding:8px 10px;"
    "border-radius:4px;margin:6px 0}"
    ".cols{display:grid;grid-template-columns:1fr 1fr;gap:0 28px}"
    "@media (max-width:760px){.cols{grid-template-columns:1fr}main{padding:16px}"
    "dl.kv.pr{grid-template-columns:max-content 1fr}}"
    ".pz path,.pz line,.pz rect,.pf path{vector-effect:non-scaling-stroke}"
    "svg.tl{cursor:crosshair;user-select:none}.cur,.sel{pointer-events:none}"
    ".sel{fill:#2b6cb0;fill-opacity:.12;stroke:#2b6cb0}"
    ".ab{stroke:none}.ab:hover,.ab.pin{stroke:#1f2933;stroke-width:1.5}"
    ".k0{fill:#9aa5b1}.k1{fill:#4c78a8}.k2{fill:#72b7b2}.k3{fill:#eeca3b}.k4{fill:#f58518}"
    ".k5{fill:#54a24b}.k6{fill:#e45756}.k7{fill:#b279a2}.al-rest{fill:#cbd2d9;fill-opacity:.8}"
    ".ss{stroke:#1f2933;stroke-width:1.5}.sb{stroke:#fff;stroke-width:.4}.sb:hover{stroke:#1f2933;"
    "stroke-width:1.2}"
    ".sg{fill:#fff;stroke:#cbd2d9}"
    ".sq{fill:#c53030}.sl{fill:#2b6cb0}.sf{fill:#7aa7d9}.su{fill:#cbd2d9}"
    ".oomv{color:var(--bad);font-weight:600}details.segm summary{color:var(--fg)}"
    ".al-tip{min-height:1.5em;font-size:12.5px;margin:2px 0;overflow-wrap:anywhere}"
    "#zr{position:fixed;right:18px;bottom:18px;padding:6px 14px;border:1px solid #2b6cb0;"
    "border-radius:4px;background:#fff;color:#2b6cb0;font:inherit;cursor:pointer;"
    "box-shadow:0 1px 4px rgba(0,0,0,.15)}#zr[hidden]{display:none}"
    "@media print{body{background:#fff}main{box-shadow:none}.run{break-inside:avoid}}";

/* The page script: a hover cursor (one column index for every timeline
 * chart), drag-to-zoom on every time chart (the nested plot <svg>'s viewBox
 * and the zoomed axis' pre-written ticks), and the allocation bands' hover
 * and pinned read-out. It reads only numbers and names the page itself
 * wrote (data-*, <title> text), and sets only textContent and attributes.
 * Without it the page still reads (native <title> tips, the full range). */
static const char script[] =
    "(function(){'use strict';"
    "var S=[].slice.call(document.querySelectorAll('svg.tl'));"
    "[].forEach.call(document.querySelectorAll('g.tt'),function(g){g.parentNode.removeChild(g);});"
    "var D=S.map(function(s){return(s.getAttribute('data-v')||'').split(' ')"
    ".map(function(p){return p.split(',');});});"
    "var za=0,zb=1,drag=null,moved=0,pin=null;"
    "function fr(s,e){var p=s.createSVGPoint();p.x=e.clientX;p.y=e.clientY;"
    "var q=p.matrixTransform(s.getScreenCTM().inverse()),d=s.dataset;"
    "return(q.x-(+d.px0))/(+d.pw);}"
    "function show(c,fz){S.forEach(function(s,i){var g=s.querySelector('g.cur');if(!g)return;"
    "var d=s.dataset,f=((c+0.5)/(+d.n)-za)/(zb-za),row=D[i][c]||[],t=(c+0.5)*(+d.tc),tp=4,"
    "F=s._fl;"
    /* where the fine layer is drawn, its column's values (reserved,
     * allocated, requested, requested min), time and cursor position */
    "if(F&&c>=0&&fz>=0){var L=F.l,j=Math.floor((fz-L.f0)/(L.f1-L.f0)*400);if(j>=0&&j<400){"
    "var fc=L.f0+(j+0.5)/400*(L.f1-L.f0),cw=(L.f1-L.f0)*(+d.tc),q=function(v){"
    "return v.toFixed(L.dg);},lo=q(L.v[3][j]),hi=q(L.v[2][j]);"
    "row=[lo===hi?hi:lo+'\\u2013'+hi,q(L.v[1][j]),q(L.v[0][j])];t=fc*400*(+d.tc);"
    "tp=Math.min(15,Math.max(4,Math.ceil(Math.log(t/cw)/Math.LN10)+2));f=(fc-za)/(zb-za);}}"
    "if(c<0||f<0||f>1){g.setAttribute('visibility','hidden');return;}"
    "var x=(+d.px0)+f*(+d.pw),n=(d.names||'').split('|'),"
    "l=g.querySelector('line'),s2='t '+(+t.toPrecision(tp))+' '+d.tu,"
    "lg=d.legend?document.getElementById(d.legend):null,"
    "lv=lg?lg.querySelectorAll('b.lv'):[];"
    "l.setAttribute('x1',x);l.setAttribute('x2',x);"
    "n.forEach(function(k,j){var v=row[j],w=v&&v!=='-'?v+' '+d.unit:'\\u2014';"
    "if(lv[j])lv[j].textContent=w;else s2+='  \\u00b7  '+k+' '+w;});"
    "g.querySelector('text').textContent=s2;g.setAttribute('visibility','visible');});}"
    "function nice(r){var m=Math.pow(10,Math.floor(Math.log(r)/Math.LN10)),k=r/m;"
    "return(k<=1?1:k<=2?2:k<=5?5:10)*m;}"
    "function zoom(a,b){za=Math.max(0,a);zb=Math.min(1,b);var z=za>0||zb<1,"
    "R=document.getElementById('zr');"
    "if(R){if(z)R.removeAttribute('hidden');else R.setAttribute('hidden','');}"
    "S.forEach(function(s){var d=s.dataset,px0=+d.px0,pw=+d.pw,k=zb-za;"
    "[].forEach.call(s.querySelectorAll('svg.pz'),function(p){p.setAttribute('viewBox',"
    "(px0+za*pw)+' '+p.getAttribute('y')+' '+(k*pw)+' '+p.getAttribute('height'));});"
    "[].forEach.call(s.querySelectorAll('g.oom'),function(g){var x=+g.getAttribute('data-x');"
    "g.setAttribute('transform','translate('+x+' 0) scale('+k+' 1) translate('+(-x)+' 0)');});"
    "var a0=s.querySelector('g.xax0'),a1=s.querySelector('g.xax1');if(!a0||!a1)return;"
    "a0.setAttribute('visibility',z?'hidden':'visible');"
    "a1.setAttribute('visibility',z?'visible':'hidden');if(!z)return;"
    "var sp=+d.span,t0=za*sp,t1=zb*sp,w=t1-t0,"
    "u=w>=1e9?[1e9,'s']:w>=1e6?[1e6,'ms']:w>=1e3?[1e3,'\\u00b5s']:[1,'ns'],st=nice(w/8),"
    "L=a1.querySelectorAll('line'),T=a1.querySelectorAll('text'),i=0;"
    "for(var v=Math.ceil(t0/st)*st;v<=t1+st*1e-6&&i<L.length;v+=st,i++){"
    "var x=px0+(v-t0)/w*pw;L[i].setAttribute('x1',x);L[i].setAttribute('x2',x);"
    "L[i].setAttribute('visibility','visible');T[i].setAttribute('x',Math.min(x,px0+pw-20));"
    "T[i].textContent=(+(v/u[0]).toPrecision(Math.min(15,Math.max(6,"
    "Math.ceil(Math.log(t1/st)/Math.LN10)+2))))+' '+u[1];"
    "T[i].setAttribute('visibility','visible');}"
    "for(;i<L.length;i++){L[i].setAttribute('visibility','hidden');"
    "T[i].setAttribute('visibility','hidden');}});fine(z);yfit(z);tiny(z);}"
    /* a chart zoomed below one pixel of its own columns and with no finer
     * level drawn has nothing more to show (and the browser cannot draw a
     * viewBox that narrow): its plot is hidden behind a line that says so */
    "function tiny(z){S.forEach(function(s){var d=s.dataset,t=z&&(zb-za)*(+d.pw)<1&&!s._fl,"
    "P=s.querySelectorAll('svg.pz'),m=s.querySelector('text.zf');if(!P.length)return;"
    "[].forEach.call(P,function(p){if(t)p.setAttribute('visibility','hidden');"
    "else p.removeAttribute('visibility');});"
    "if(t&&!m){m=document.createElementNS(s.namespaceURI,'text');"
    "m.setAttribute('class','zf');m.setAttribute('x',(+d.px0)+(+d.pw)/2);"
    "m.setAttribute('y',(+P[0].getAttribute('y'))+(+P[0].getAttribute('height'))/2);"
    "m.setAttribute('text-anchor','middle');m.textContent='this chart keeps no finer "
    "data than this: zoom out (double-click) to see it';s.appendChild(m);}"
    "if(m)m.setAttribute('visibility',t?'visible':'hidden');});}"
    /* finer data when zoomed: the finest level of data-lv whose window
     * holds the zoomed range, drawn as steps in the fine layer */
    "function fine(z){S.forEach(function(s){var d=s.dataset,pf=s.querySelector('svg.pf'),"
    "cr=s.querySelector('g.crs');if(!d.lv||!pf)return;"
    "if(!s._lv)s._lv=d.lv.split('|').map(function(t){var p=t.split(';'),h=p[0].split(',')"
    ".map(Number);return{f0:h[0],f1:h[1],lo:h[2],hi:h[3],v:p.slice(1).map(function(q){"
    "return q.split(',').map(function(x){return h[2]+(+x)/999*(h[3]-h[2]);});}),"
    "dg:Math.min(6,Math.max(0,-Math.floor(Math.log((h[3]-h[2])/999)/Math.LN10)))};});"
    "var L=null,e=1e-9;if(z)s._lv.forEach(function(l){if(l.f0<=za+e&&l.f1>=zb-e&&"
    "(!L||l.f1-l.f0<L.f1-L.f0))L=l;});s._fl=null;"
    /* the OOMs at their exact times while the fine layer is drawn */
    "var px0=+d.px0,pw=+d.pw,X=L&&L.f1-L.f0<1e-3;"
    "[].forEach.call(s.querySelectorAll('g.oom'),function(g){"
    "g.setAttribute('visibility',X?'hidden':'visible');});"
    "[].forEach.call(s.querySelectorAll('g.fo'),function(g){"
    "var x=px0+(+g.getAttribute('data-f')-za)/(zb-za)*pw,v=X&&x>=px0-1&&x<=px0+pw+1;"
    "g.setAttribute('visibility',v?'visible':'hidden');"
    "if(v)g.setAttribute('transform','translate('+x+' 0)');});"
    "if(!L){pf.setAttribute('visibility','hidden');"
    "if(cr)cr.removeAttribute('visibility');return;}"
    "var y0=+d.y0,y1=+d.y1,tp=+d.top,bt=+d.bot,py=function(v){return bt-(v-y0)/(y1-y0)*(bt-tp);},"
    "P=pf.querySelectorAll('path');L.v.forEach(function(v,k){var t='M0 '+py(v[0]).toFixed(2)+'H1';"
    "for(var j=1;j<v.length;j++)t+='V'+py(v[j]).toFixed(2)+'H'+(j+1);if(P[k])P[k]"
    ".setAttribute('d',t);});"
    "var u0=(za-L.f0)/(L.f1-L.f0)*400,uw=(zb-za)/(L.f1-L.f0)*400;"
    "s._fl={l:L,u0:u0,uw:uw};pf.setAttribute('visibility','visible');"
    "if(cr)cr.setAttribute('visibility','hidden');});}"
    /* the memory charts' y axis refitted to what the zoomed range shows
     * (all of them on one axis), the limit and capacity lines kept when
     * they stretch it by less than half; reset restores the written axis */
    "function yfit(z){var G=S.filter(function(s){return s.dataset.yr;}),lo=1/0,hi=-1/0;"
    "if(z)G.forEach(function(s){var d=s.dataset,n=+d.n,V=D[S.indexOf(s)],F=s._fl;"
    "if(F){F.l.v.forEach(function(v){for(var c=Math.max(0,Math.floor(F.u0));"
    "c<Math.min(400,Math.ceil(F.u0+F.uw));c++){if(v[c]<lo)lo=v[c];if(v[c]>hi)hi=v[c];}});"
    "return;}"
    "var c1=Math.min(n,Math.ceil(zb*n));for(var c=Math.floor(za*n);c<c1;c++)(V[c]||[])"
    ".forEach(function(x){(x.match(/[0-9.]+/g)||[]).forEach(function(t){var v=+t;"
    "if(v<lo)lo=v;if(v>hi)hi=v;});});});"
    "var f=z&&hi>=lo;if(f){var sp=hi-lo||Math.abs(hi)*0.1||1,l=lo,h=hi;"
    "G.forEach(function(s){[].forEach.call(s.querySelectorAll('g.hl'),function(g){"
    "var v=+g.getAttribute('data-hv');if(Math.max(hi,v)-Math.min(lo,v)<=1.5*sp){"
    "l=Math.min(l,v);h=Math.max(h,v);}});});"
    "sp=h-l||sp;lo=Math.max(0,l-0.06*sp);hi=h+0.06*sp;}"
    "G.forEach(function(s){var d=s.dataset,y0=+d.y0,y1=+d.y1,tp=+d.top,bt=+d.bot,ph=bt-tp,"
    "py=function(v){return bt-(v-y0)/(y1-y0)*ph;},ny=function(v){return tp+(hi-v)/(hi-lo)*ph;},"
    "a0=s.querySelector('g.yax0'),a1=s.querySelector('g.yax1'),vy=f?py(hi):tp,"
    "vh=f?py(lo)-py(hi):ph,k=zb-za,px0=+d.px0,pw=+d.pw;"
    "[].forEach.call(s.querySelectorAll('svg.pz'),function(p){var b=p.getAttribute('viewBox')"
    ".split(' ');p.setAttribute('viewBox',b[0]+' '+vy+' '+b[2]+' '+vh);});"
    "var pf=s.querySelector('svg.pf');if(pf&&s._fl)pf.setAttribute('viewBox',s._fl.u0+' '+vy+' '"
    "+s._fl.uw+' '+vh);"
    "[].forEach.call(s.querySelectorAll('g.oom'),function(g){var x=+g.getAttribute('data-x');"
    "g.setAttribute('transform','translate('+x+' '+vy+') scale('+k+' '+(vh/ph)+') translate('"
    "+(-x)+' '+(-tp)+')');});"
    "[].forEach.call(s.querySelectorAll('g.hl'),function(g){var v=+g.getAttribute('data-hv'),"
    "y=ny(v);g.setAttribute('transform',f?'translate(0 '+(y-py(v))+')':'');"
    "g.setAttribute('visibility',!f||(y>=tp-1&&y<=bt+1)?'visible':'hidden');});"
    "if(!a0||!a1)return;a0.setAttribute('visibility',f?'hidden':'visible');"
    "a1.setAttribute('visibility',f?'visible':'hidden');if(!f)return;"
    "var st=nice((hi-lo)/5),L=a1.querySelectorAll('line'),T=a1.querySelectorAll('text'),i=0,"
    "dg=Math.max(0,-Math.floor(Math.log(st)/Math.LN10));"
    "for(var v=Math.ceil(lo/st)*st;v<=hi&&i<L.length;v+=st,i++){var y=ny(v);"
    "L[i].setAttribute('y1',y);L[i].setAttribute('y2',y);T[i].setAttribute('y',y+3.5);"
    "T[i].textContent=v.toFixed(Math.min(dg,6))+' '+d.unit;"
    "L[i].setAttribute('visibility','visible');T[i].setAttribute('visibility','visible');}"
    "for(;i<L.length;i++){L[i].setAttribute('visibility','hidden');"
    "T[i].setAttribute('visibility','hidden');}});"
    /* the legends' "y axis from X" says the refitted range */
    "var "
    "u=G.length?G[0].dataset.unit:'',dg=Math.max(0,-Math.floor(Math.log((hi-lo)/5)/Math.LN10)+1);"
    "[].forEach.call(document.querySelectorAll('span.yf'),function(e){"
    "if(e._t===undefined)e._t=e.textContent;if(f){e.textContent='y axis "
    "'+lo.toFixed(Math.min(dg,6))"
    "+' \u2013 '+hi.toFixed(Math.min(dg,6))+' '+u+', fitted to the zoomed range';"
    "e.removeAttribute('hidden');}else{e.textContent=e._t;if(!e._t)e.setAttribute('hidden','');}});"
    "}"
    "S.forEach(function(s){var d=s.dataset,sel=s.querySelector('rect.sel');"
    "s.addEventListener('mousedown',function(e){if(e.button!==0)return;"
    "drag={s:s,f:fr(s,e)};moved=0;e.preventDefault();});"
    "s.addEventListener('mousemove',function(e){var f=fr(s,e),fz=za+f*(zb-za),"
    "c=Math.floor(fz*(+d.n));show(f>=0&&f<=1&&c>=0&&c<(+d.n)?c:-1,fz);"
    "if(drag&&drag.s===s&&sel){var a=Math.max(0,Math.min(drag.f,f)),"
    "b=Math.min(1,Math.max(drag.f,f));sel.setAttribute('x',(+d.px0)+a*(+d.pw));"
    "sel.setAttribute('width',(b-a)*(+d.pw));sel.setAttribute('visibility','visible');}});"
    "s.addEventListener('mouseleave',function(){show(-1);"
    "[].forEach.call(document.querySelectorAll('b.lv'),function(b){b.textContent='';});});"
    "s.addEventListener('dblclick',function(){zoom(0,1);});"
    "var tip=document.getElementById(s.id+'-tip');if(!tip)return;"
    "s.addEventListener('mouseover',function(e){var r=e.target;"
    "if(pin||!r.classList||!r.classList.contains('ab'))return;"
    "tip.textContent=r.querySelector('title').textContent;});"
    "s.addEventListener('click',function(e){var r=e.target;if(moved){moved=0;return;}"
    "if(!r.classList||!r.classList.contains('ab'))return;"
    "if(pin)pin.classList.remove('pin');if(pin===r){pin=null;return;}"
    "pin=r;r.classList.add('pin');"
    "tip.textContent='pinned (click again to release): '+r.querySelector('title').textContent;"
    "});});"
    "document.addEventListener('mouseup',function(e){if(!drag)return;"
    "var s=drag.s,f=fr(s,e),a=Math.max(0,Math.min(drag.f,f)),b=Math.min(1,Math.max(drag.f,f)),"
    "sel=s.querySelector('rect.sel');if(sel)sel.setAttribute('visibility','hidden');"
    "if((b-a)*(+s.dataset.pw)>4){var k=zb-za;moved=1;zoom(za+a*k,za+b*k);}drag=null;});"
    "var R=document.getElementById('zr');if(R)R.addEventListener('click',function(){zoom(0,1);});"
    /* read-outs of segment maps and of the search pages (.tips: an
     * element's <title>, or a row's data-tip, written into ID-tip) */
    "[].forEach.call(document.querySelectorAll('svg.segmap,.tips'),function(s){"
    "var tip=document.getElementById(s.id+'-tip');if(!tip)return;"
    "s.addEventListener('mouseover',function(e){var r=e.target,t=r!==s&&r.querySelector?"
    "r.querySelector(':scope>title'):null,d=r.closest?r.closest('[data-tip]'):null;"
    "if(t)tip.textContent=t.textContent;else if(d&&s.contains(d))"
    "tip.textContent=d.getAttribute('data-tip');});});"
    "document.documentElement.className+=' js';})();";

/* ------------------------------------------------------------ helpers */

static void esc(gm_strbuf *b, const char *s)
{
    gm_sb_esc(b, s ? s : "\xe2\x80\x94");
}

static const char *bytes_s(double v, gm_unit u, char *buf, size_t len)
{
    return gm_fmt_unit(v, u, 2, buf, len);
}

static const char *ms_s(double ns, char *buf, size_t len)
{
    return gm_fmt_unit(ns, (gm_unit){"ms", 1e6}, 2, buf, len);
}

static const char *base_name(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "?";
}

static int is_aborted(json_t *tenant)
{
    const char *s = rep_str(tenant, "status");
    return s && !strcmp(s, "aborted");
}

/* A random CSP nonce: the page's own script runs, nothing else could. */
static void nonce(char *out, size_t len)
{
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        gm_hash h;
        gm_hash_init(&h);
        gm_hash_u64(&h, (uint64_t)time(NULL));
        gm_hash_u64(&h, (uint64_t)getpid());
        uint64_t x = gm_hash_final(&h);
        memcpy(r, &x, 8);
        gm_hash_u64(&h, x);
        x = gm_hash_final(&h);
        memcpy(r + 8, &x, 8);
    }
    for (size_t i = 0; i < sizeof r && 2 * i + 2 < len; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
}

/* ------------------------------------------------------------- header */

static void page_head(gm_strbuf *b, const rep *p, const char *nce)
{
    gm_sb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    gm_sb_printf(b,
                 "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                 "style-src 'unsafe-inline'; script-src 'nonce-%s'; img-src data:\">",
                 nce);
    gm_sb_puts(b,
               "<meta name=\"generator\" content=\"gmsim " GM_VERSION "\"><title>gmsim report: ");
    for (size_t k = 0; k < p->run[0].nt; k++) {
        gm_sb_puts(b, k ? ", " : "");
        esc(b, base_name(rep_str(p->run[0].t[k].j, "trace")));
    }
    gm_sb_printf(b, "</title><style>%s</style></head><body><main>\n", css);
}

/* "a, b" list of the traces of the first run, linked to nothing. */
static void trace_names(gm_strbuf *b, const rep *p)
{
    for (size_t k = 0; k < p->run[0].nt; k++) {
        gm_sb_puts(b, k ? ", " : "");
        gm_sb_puts(b, "<code>");
        esc(b, base_name(rep_str(p->run[0].t[k].j, "trace")));
        gm_sb_puts(b, "</code>");
    }
}

static void title_block(gm_strbuf *b, const rep *p)
{
    json_t *first = p->run[0].j;
    const char *created = rep_str(p->root, "created_utc");
    const char *ver = rep_str(p->root, "gmsim_version");
    char cap[32];
    gm_sb_puts(b, "<header><h1>");
    if (p->n > 1)
        gm_sb_printf(b, "%zu runs compared on ", p->n);
    else
        gm_sb_puts(b, "Simulated run of ");
    trace_names(b, p);
    gm_sb_puts(b, "</h1><p class=\"sub\">");
    if (p->multi > 1) gm_sb_printf(b, "%zu tenants sharing one device \xc2\xb7 ", p->multi);
    if (isnan(p->capacity))
        gm_sb_puts(b, "device capacity varies by run \xc2\xb7 ");
    else
        gm_sb_printf(b, "%s device \xc2\xb7 ", gm_fmt_bytes_auto(p->capacity, cap, sizeof cap));
    esc(b, rep_str(first, "inputs.allocator"));
    gm_sb_puts(b, " allocator \xc2\xb7 gmsim ");
    esc(b, ver ? ver : rep_str(first, "gmsim_version"));
    gm_sb_puts(b, " \xc2\xb7 ");
    esc(b, created ? created : rep_str(first, "created_utc"));
    gm_sb_puts(b, "</p></header>\n");
}

static const rep_run *find_policy(const rep *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->run[i].policy && !strcmp(p->run[i].policy, name)) return &p->run[i];
    return NULL;
}

/* Reserved bytes relative to the limit: "1.12x peak live". */
static void over_limit(gm_strbuf *b, const rep *p, json_t *m)
{
    double r = rep_num(m, "peak_reserved_bytes");
    if (p->peak_live > 0 && !isnan(r)) gm_sb_printf(b, "%.2f\xc3\x97 peak live", r / p->peak_live);
}

/* The first OOM's verdict (sim/metrics.h) and the numbers behind it. */
static void first_oom(gm_strbuf *b, json_t *m)
{
    json_t *ooms = json_object_get(m, "ooms");
    json_t *o = json_is_array(ooms) ? json_array_get(ooms, 0) : NULL;
    const char *v = o ? rep_str(o, "verdict") : NULL;
    if (!v) return;
    char v1[32], v2[32], v3[32], v4[32];
    double size = rep_num(o, "size_bytes"), alloc = rep_num(o, "allocated_bytes");
    double res = rep_num(o, "reserved_bytes"), lim = rep_num(o, "limit_bytes");
    gm_sb_printf(b, "<p>First OOM, event %s: <b>",
                 gm_fmt_count(rep_num(o, "event_index"), v1, sizeof v1));
    esc(b, v);
    gm_sb_puts(b, "</b> \xe2\x80\x94 ");
    if (!strcmp(v, "shortage"))
        gm_sb_printf(b, "%s allocated + %s requested exceed the %s this job may hold.</p>",
                     gm_fmt_bytes((uint64_t)(alloc), v1, sizeof v1),
                     gm_fmt_bytes((uint64_t)(size), v2, sizeof v2),
                     gm_fmt_bytes((uint64_t)(lim), v3, sizeof v3));
    else if (!strcmp(v, "fragmentation"))
        gm_sb_printf(b,
                     "%s free in the cache (reserved \xe2\x88\x92 allocated), %s requested, but "
                     "the largest free block is %s.</p>",
                     gm_fmt_bytes((uint64_t)(res - alloc), v1, sizeof v1),
                     gm_fmt_bytes((uint64_t)(size), v2, sizeof v2),
                     gm_fmt_bytes((uint64_t)rep_num(o, "largest_free_bytes"), v3, sizeof v3));
    else
        gm_sb_printf(b, "the other tenants use %s; %s requested, %s reserved by this job.</p>",
                     gm_fmt_bytes((uint64_t)rep_num(o, "other_tenants_bytes"), v1, sizeof v1),
                     gm_fmt_bytes((uint64_t)(size), v2, sizeof v2),
                     gm_fmt_bytes((uint64_t)(res), v4, sizeof v4));
}

/* The call sites holding the most at the first OOM (a run's "explain",
 * when its trace names sites). */
static void oom_sites(gm_strbuf *b, json_t *doc)
{
    json_t *at = json_object_get(json_object_get(doc, "explain"), "live_at_first_oom");
    json_t *top = json_object_get(at, "top_sites");
    if (!json_is_array(top) || !json_array_size(top)) return;
    char v1[32], v2[32];
    gm_sb_puts(b, "<p>Live at it, by call site: ");
    for (size_t i = 0; i < json_array_size(top); i++) {
        json_t *e = json_array_get(top, i);
        const char *site = rep_str(e, "site");
        gm_sb_puts(b, i ? ", <code>" : "<code>");
        esc(b, site ? site : "?");
        gm_sb_printf(b, "</code> %s (%s)",
                     gm_fmt_bytes((uint64_t)rep_num(e, "bytes"), v1, sizeof v1),
                     gm_fmt_count(rep_num(e, "count"), v2, sizeof v2));
    }
    gm_sb_puts(b, ".</p>");
}

static void verdict(gm_strbuf *b, const rep *p)
{
    char v1[32], v2[32], v3[32];
    int w = p->winner >= 0 ? p->winner : (int)p->order[0];
    const rep_run *r = &p->run[w];
    double ooms = rep_num(r->m, "oom_count");
    gm_sb_printf(b, "<div class=\"verdict%s\"><p>", ooms > 0 ? " warn" : "");
    gm_sb_puts(b, p->winner >= 0 ? "<b>Winner: " : "<b>");
    esc(b, r->label);
    gm_sb_puts(b, "</b> \xe2\x80\x94 ");
    if (ooms > 0)
        gm_sb_printf(b, "<b>%s OOM%s</b>", gm_fmt_count(ooms, v1, sizeof v1), ooms == 1 ? "" : "s");
    else
        gm_sb_puts(b, "no OOM");
    gm_sb_printf(b, "; peak reserved %s (",
                 bytes_s(rep_num(r->m, "peak_reserved_bytes"), p->yu, v1, sizeof v1));
    over_limit(b, p, r->m);
    gm_sb_printf(b, "), fragmentation %s, utilization %s, driver time %s.</p>",
                 gm_fmt_pct(rep_num(r->m, "fragmentation"), v1, sizeof v1),
                 gm_fmt_pct(rep_num(r->m, "utilization"), v2, sizeof v2),
                 ms_s(rep_num(r->m, "driver.total_ns"), v3, sizeof v3));
    first_oom(b, r->m);
    oom_sites(b, r->j);
    const rep_run *base = find_policy(p, "pytorch");
    if (p->winner >= 0 && base && base != r) {
        double d = rep_num(r->m, "peak_reserved_bytes") - rep_num(base->m, "peak_reserved_bytes");
        double bo = rep_num(base->m, "oom_count");
        gm_sb_printf(b, "<p>Against the <code>pytorch</code> baseline: peak reserved %s%s",
                     d <= 0 ? "\xe2\x88\x92" : "+", bytes_s(fabs(d), p->yu, v1, sizeof v1));
        if (bo != ooms)
            gm_sb_printf(b, ", OOMs %s \xe2\x86\x92 %s", gm_fmt_count(bo, v2, sizeof v2),
                         gm_fmt_count(ooms, v3, sizeof v3));
        gm_sb_printf(b, ", fragmentation %s \xe2\x86\x92 ",
                     gm_fmt_pct(rep_num(base->m, "fragmentation"), v1, sizeof v1));
        gm_sb_printf(b, "%s.</p>", gm_fmt_pct(rep_num(r->m, "fragmentation"), v1, sizeof v1));
    }
    for (size_t i = 0; i < p->n; i++)
        if (!p->run[i].realizable) {
            gm_sb_puts(b, "<p>Bound: <code>");
            esc(b, p->run[i].label);
            gm_sb_printf(
                b,
                "</code> (uses the trace's future; no real policy can) reserves %s "
                "at peak.</p>",
                bytes_s(rep_num(p->run[i].m, "peak_reserved_bytes"), p->yu, v1, sizeof v1));
        }
    gm_sb_printf(b,
                 "<p class=\"note\">Peak live bytes, %s, are the limit: no allocator can "
                 "reserve less.</p></div>\n",
                 bytes_s(p->peak_live, p->yu, v1, sizeof v1));
}

/* -------------------------------------------------------------- table */

static void th(gm_strbuf *b, const char *cls, const char *label, const char *title)
{
    gm_sb_printf(b, "<th class=\"%s\" title=\"%s\">%s</th>", cls, title, label);
}

static void bar(gm_strbuf *b, const rep *p, double v)
{
    double w = p->ymax > 0 && !isnan(v) ? fmin(100, 100 * v / p->ymax) : 0;
    double l = p->ymax > 0 ? fmin(100, 100 * p->peak_live / p->ymax) : 0;
    gm_sb_printf(b,
                 "<span class=\"bar\"><i style=\"width:%.1f%%\"></i><b style=\"left:%.1f%%\">"
                 "</b></span>",
                 w, l);
}

static void table_row(gm_strbuf *b, const rep *p, size_t k)
{
    const rep_run *r = &p->run[k];
    char v[48], v2[48];
    int win = (int)k == p->winner;
    gm_sb_printf(b, "<tr class=\"%s\"><td class=\"l\">",
                 win             ? "win"
                 : r->realizable ? ""
                                 : "bound");
    if (r->realizable)
        gm_sb_printf(b, "%d", r->rank);
    else
        gm_sb_puts(b, "bound");
    gm_sb_printf(b,
                 "</td><td class=\"l pol\"><span class=\"sw\" style=\"background:%s\"></span>"
                 "<a href=\"#run-%zu\">",
                 rep_color(r->color), k);
    esc(b, r->label);
    gm_sb_puts(b, "</a>");
    if (win) gm_sb_puts(b, "<span class=\"badge win\">winner</span>");
    if (!r->realizable) gm_sb_puts(b, "<span class=\"badge bound\">unrealizable</span>");
    double ooms = rep_num(r->m, "oom_count");
    gm_sb_printf(b, "</td><td>%s%s%s</td>", ooms > 0 ? "<span class=\"badge oom\">" : "",
                 gm_fmt_count(ooms, v, sizeof v), ooms > 0 ? "</span>" : "");
    if (p->multi > 1) {
        gm_sb_printf(b, "<td>%s/", gm_fmt_num(rep_num(r->m, "tenants_completed"), 0, v, sizeof v));
        gm_sb_printf(b, "%s</td>", gm_fmt_num(rep_num(r->m, "tenants"), 0, v, sizeof v));
    }
    double pr = rep_num(r->m, "peak_reserved_bytes");
    gm_sb_printf(b, "<td>%.2f", pr / p->yu.div);
    bar(b, p, pr);
    snprintf(v2, sizeof v2, "%.2f", pr / p->peak_live);
    gm_sb_printf(b, "</td><td>%s</td>", p->peak_live > 0 && !isnan(pr) ? v2 : "\xe2\x80\x94");
    gm_sb_printf(b, "<td>%s</td>", gm_fmt_pct(rep_num(r->m, "fragmentation"), v, sizeof v));
    gm_sb_printf(b, "<td>%s</td>", gm_fmt_pct(rep_num(r->m, "utilization"), v, sizeof v));
    gm_sb_printf(b, "<td>%s</td>",
                 gm_fmt_pct(rep_num(r->m, "external_fragmentation_mean"), v, sizeof v));
    gm_sb_printf(b, "<td>%s / ", gm_fmt_count(rep_num(r->m, "driver.malloc_calls"), v, sizeof v));
    gm_sb_printf(b, "%s</td>", gm_fmt_count(rep_num(r->m, "driver.free_calls"), v, sizeof v));
    double ms = rep_num(r->m, "driver.total_ns") / 1e6;
    gm_sb_printf(b, "<td>%s</td></tr>\n",
                 ms >= 1000 ? gm_fmt_count(ms, v, sizeof v) : gm_fmt_num(ms, 2, v, sizeof v));
}

static void comparison_table(gm_strbuf *b, const rep *p)
{
    char v[48];
    gm_sb_printf(b, "<h2 id=\"ranking\">%s</h2>", p->n > 1 ? "Ranking" : "Summary");
    gm_sb_puts(b, "<table class=\"cmp\" id=\"cmp-table\"><thead><tr>");
    th(b, "l", "#", "rank among realizable policies");
    th(b, "l", "policy", "release policy and its parameters");
    /* (policy labels may be long: their cell wraps, numbers never do) */
    th(b, "", "OOMs", "allocations that failed after policy and allocator did all they could");
    if (p->multi > 1) th(b, "", "tenants done", "tenants that ran to completion");
    gm_sb_printf(b,
                 "<th title=\"max reserved bytes (held from the driver); the black tick is "
                 "peak live bytes, the limit\">peak reserved, %s</th>",
                 p->yu.name);
    th(b, "", "\xc3\x97 peak live", "peak reserved / peak live bytes (1.00 = the limit)");
    th(b, "", "fragmentation", "1 - peak allocated / peak reserved (GMLake)");
    th(b, "", "utilization", "time-weighted allocated / reserved");
    th(b, "", "ext. frag. mean", "mean of 1 - largest free block / (reserved - allocated)");
    th(b, "", "driver calls<br>malloc / free", "cudaMalloc / cudaFree calls");
    th(b, "", "driver time, ms", "modelled time of the driver calls");
    gm_sb_puts(b, "</tr></thead><tbody>\n");
    for (size_t i = 0; i < p->n; i++)
        if (p->run[p->order[i]].realizable) table_row(b, p, p->order[i]);
    for (size_t i = 0; i < p->n; i++)
        if (!p->run[p->order[i]].realizable) table_row(b, p, p->order[i]);
    snprintf(v, sizeof v, "%.2f", p->peak_live / p->yu.div);
    gm_sb_printf(b,
                 "<tr class=\"limit ref\" title=\"no allocator can reserve less than the peak "
                 "of live (requested) bytes\"><td class=\"l\">limit</td><td class=\"l\">peak "
                 "live bytes</td><td></td>%s<td>%s",
                 p->multi > 1 ? "<td></td>" : "", v);
    bar(b, p, p->peak_live);
    gm_sb_puts(b, "</td><td>1.00</td><td colspan=\"5\"></td></tr>\n</tbody></table>");
    if (!p->ranking_given && p->n > 1)
        gm_sb_puts(b, "<p class=\"note\">Ranked by OOMs, then fragmentation, then utilization, "
                      "then driver time; unrealizable policies are shown as the bound.</p>");
}

/* ---------------------------------------------------------- run cards */

static void legend_memory(gm_strbuf *b, const rep *p, const rep_run *r)
{
    char v[32];
    gm_sb_puts(b,
               "<div class=\"legend\"><span><i class=\"key\" style=\"border-color:#1a202c\">"
               "</i>requested (live)</span><span><i class=\"key\" style=\"border-color:#2b6cb0\">"
               "</i>allocated</span><span><i class=\"key fill\" style=\"background:#fbd38d\">"
               "</i>reserved</span><span><i class=\"key fill\" style=\"background:#d1d2d5\">"
               "</i>requested, allocated: min to max within a column (lines: max)</span>"
               "<span><i class=\"key dot\" style=\"border-color:#1a202c\">"
               "</i>limit: peak live</span>");
    if (r->usable > 0 && r->usable <= p->ymax)
        gm_sb_puts(b, "<span><i class=\"key dash\" style=\"border-color:#c53030\"></i>usable "
                      "capacity (capacity \xe2\x88\x92 context)</span>");
    else if (r->capacity > 0)
        gm_sb_printf(b, "<span>capacity %s (above the axis)</span>",
                     gm_fmt_bytes_auto(r->capacity, v, sizeof v));
    gm_sb_puts(b, "<span><b style=\"color:#c53030\">\xe2\x96\xbc</b> OOM</span>");
    /* (the script rewrites it while zoomed: the refitted range) */
    if (p->ymin > 0)
        gm_sb_printf(b, "<span class=\"yf\">y axis from %s, fitted to the data</span>",
                     gm_fmt_bytes_auto(p->ymin, v, sizeof v));
    else
        gm_sb_puts(b, "<span class=\"yf\" hidden></span>");
    gm_sb_puts(b, "</div>");
}

static void kpis(gm_strbuf *b, const rep *p, const rep_run *r)
{
    char v[48], v2[48];
    double ooms = rep_num(r->m, "oom_count");
    gm_sb_puts(b, "<div class=\"kpis\">");
    gm_sb_printf(b, "<span>OOMs <b>%s</b></span>", gm_fmt_count(ooms, v, sizeof v));
    gm_sb_printf(b, "<span>peak reserved <b>%s</b> (",
                 bytes_s(rep_num(r->m, "peak_reserved_bytes"), p->yu, v, sizeof v));
    over_limit(b, p, r->m);
    gm_sb_printf(b, ")</span><span>peak allocated <b>%s</b></span>",
                 bytes_s(rep_num(r->m, "peak_allocated_bytes"), p->yu, v, sizeof v));
    gm_sb_printf(b, "<span>fragmentation <b>%s</b></span><span>utilization <b>%s</b></span>",
                 gm_fmt_pct(rep_num(r->m, "fragmentation"), v, sizeof v),
                 gm_fmt_pct(rep_num(r->m, "utilization"), v2, sizeof v2));
    gm_sb_printf(b, "<span>driver <b>%s</b> malloc / ",
                 gm_fmt_count(rep_num(r->m, "driver.malloc_calls"), v, sizeof v));
    gm_sb_printf(b, "<b>%s</b> free, <b>%s</b></span></div>",
                 gm_fmt_count(rep_num(r->m, "driver.free_calls"), v, sizeof v),
                 ms_s(rep_num(r->m, "driver.total_ns"), v2, sizeof v2));
}

static void oom_table(gm_strbuf *b, const rep *p, const rep_run *r)
{
    json_t *ooms = json_object_get(r->m, "ooms");
    size_t n = json_array_size(ooms);
    double total = rep_num(r->m, "oom_count");
    if (n == 0) return;
    char v[6][48];
    json_t *o0 = json_array_get(ooms, 0);
    gm_sb_printf(b,
                 "<details class=\"ooms\"><summary>%s OOM%s; the first at %s: %s requested "
                 "with %s reserved, largest free block %s</summary>",
                 gm_fmt_count(total, v[0], sizeof v[0]), total == 1 ? "" : "s",
                 gm_fmt_unit(rep_num(o0, "t_ns") - p->t0, p->tu, 3, v[1], sizeof v[1]),
                 gm_fmt_bytes_auto(rep_num(o0, "size_bytes"), v[2], sizeof v[2]),
                 gm_fmt_bytes_auto(rep_num(o0, "reserved_bytes"), v[3], sizeof v[3]),
                 gm_fmt_bytes_auto(rep_num(o0, "largest_free_bytes"), v[4], sizeof v[4]));
    gm_sb_puts(b, "<table class=\"ooms\"><thead><tr><th class=\"l\">OOM at</th><th>tenant</th>"
                  "<th>event</th><th>requested</th><th>reserved</th><th>allocated</th>"
                  "<th>largest free block</th><th>device used</th></tr></thead><tbody>");
    for (size_t i = 0; i < n && i < MAX_OOM_ROWS; i++) {
        json_t *o = json_array_get(ooms, i);
        gm_sb_printf(b, "<tr><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>",
                     gm_fmt_unit(rep_num(o, "t_ns") - p->t0, p->tu, 3, v[0], sizeof v[0]),
                     gm_fmt_num(rep_num(o, "tenant"), 0, v[1], sizeof v[1]),
                     gm_fmt_count(rep_num(o, "event_index"), v[2], sizeof v[2]),
                     gm_fmt_bytes_auto(rep_num(o, "size_bytes"), v[3], sizeof v[3]),
                     gm_fmt_bytes_auto(rep_num(o, "reserved_bytes"), v[4], sizeof v[4]));
        gm_sb_printf(b, "<td>%s</td><td>%s</td><td>%s</td></tr>",
                     gm_fmt_bytes_auto(rep_num(o, "allocated_bytes"), v[0], sizeof v[0]),
                     gm_fmt_bytes_auto(rep_num(o, "largest_free_bytes"), v[1], sizeof v[1]),
                     gm_fmt_bytes_auto(rep_num(o, "device_used_bytes"), v[2], sizeof v[2]));
    }
    gm_sb_puts(b, "</tbody></table>");
    if (total > (double)(n < MAX_OOM_ROWS ? n : MAX_OOM_ROWS))
        gm_sb_printf(b,
                     "<p class=\"note\">%s OOMs in all; the first %d are listed (the JSON "
                     "keeps up to 256 in detail).</p>",
                     gm_fmt_count(total, v[0], sizeof v[0]), MAX_OOM_ROWS);
    gm_sb_puts(b, "</details>");
}

static void tenant_table(gm_strbuf *b, const rep *p, const rep_run *r)
{
    char v[5][48];
    gm_sb_puts(b, "<table><thead><tr><th class=\"l\">tenant</th><th class=\"l\">trace</th>"
                  "<th class=\"l\">status</th><th>peak live</th><th>peak reserved</th>"
                  "<th>fragmentation</th><th>OOMs</th><th>driver calls</th></tr></thead><tbody>");
    for (size_t k = 0; k < r->nt; k++) {
        json_t *t = r->t[k].j, *m = r->t[k].m;
        gm_sb_printf(b, "<tr><td class=\"l\">%zu</td><td class=\"l\"><code>", k);
        esc(b, base_name(rep_str(t, "trace")));
        gm_sb_printf(b, "</code></td><td class=\"l\">%s</td>",
                     is_aborted(t) ? "<span class=\"badge oom\">aborted</span>" : "completed");
        gm_sb_printf(
            b, "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
            bytes_s(rep_num(m, "peak_live_bytes"), p->yu_t, v[0], sizeof v[0]),
            bytes_s(rep_num(m, "peak_reserved_bytes"), p->yu_t, v[1], sizeof v[1]),
            gm_fmt_pct(rep_num(m, "fragmentation"), v[2], sizeof v[2]),
            gm_fmt_count(rep_num(m, "oom_count"), v[3], sizeof v[3]),
            gm_fmt_count(rep_num(t, "driver.malloc_calls") + rep_num(t, "driver.free_calls"), v[4],
                         sizeof v[4]));
    }
    gm_sb_puts(b, "</tbody></table>");
}

/* A saved key/value object (a policy report, a run's inputs) as <dl> rows;
 * kv.h renders every such list. */
static void kv_rows(gm_strbuf *b, json_t *obj)
{
    gm_report *r = gm_report_from_json(obj);
    gm_report_html(b, r);
    gm_report_free(r);
}

static void policy_reports(gm_strbuf *b, const rep_run *r)
{
    json_t *top = json_object_get(r->j, "policy_report");
    if (json_is_object(top)) {
        gm_sb_puts(b, "<h4>Policy report</h4><dl class=\"kv pr\">");
        kv_rows(b, top);
        gm_sb_puts(b, "</dl>");
    }
    for (size_t k = 0; k < r->nt; k++) {
        json_t *pr = json_object_get(r->t[k].j, "policy_report");
        if (!json_is_object(pr)) continue;
        gm_sb_puts(b, "<h4>Policy report");
        if (r->nt > 1) gm_sb_printf(b, ", tenant %zu", k);
        gm_sb_puts(b, "</h4><dl class=\"kv pr\">");
        kv_rows(b, pr);
        gm_sb_puts(b, "</dl>");
    }
}

/* ------------------------------------------------- reproduce commands */

/* One word of a command a user pastes into a shell: in POSIX single quotes,
 * always (a ' inside becomes '\''), so nothing in it is expanded. */
static void shell_word(gm_strbuf *b, const char *s)
{
    gm_sb_puts(b, " '");
    for (const char *c = s; *c; c++)
        if (*c == '\'')
            gm_sb_puts(b, "'\\''");
        else
            gm_sb_putn(b, c, 1);
    gm_sb_puts(b, "'");
}

/* One of gmsim's own option names: a constant, written bare. */
static void shell_opt(gm_strbuf *b, const char *opt)
{
    gm_sb_puts(b, " ");
    gm_sb_puts(b, opt);
}

static void size_word(gm_strbuf *b, const char *opt, double v)
{
    char s[48];
    uint64_t x = v > 0 && v < 18446744073709551616.0 ? (uint64_t)v : 0; /* checked on load */
    if (x && x % GM_GiB == 0)
        snprintf(s, sizeof s, "%lluGiB", (unsigned long long)(x / GM_GiB));
    else if (x && x % GM_MiB == 0)
        snprintf(s, sizeof s, "%lluMiB", (unsigned long long)(x / GM_MiB));
    else
        snprintf(s, sizeof s, "%llu", (unsigned long long)x);
    shell_opt(b, opt);
    shell_word(b, s);
}

/* The `gmsim run` command line that reproduces one run (its inputs). */
static void reproduce(gm_strbuf *out, const rep_run *r)
{
    gm_strbuf b;
    gm_sb_init(&b);
    json_t *in = json_object_get(r->j, "inputs");
    gm_sb_puts(&b, "gmsim run");
    const char *s;
    if ((s = rep_str(in, "allocator")) && strcmp(s, "pytorch"))
        shell_opt(&b, "--allocator"), shell_word(&b, s);
    if ((s = rep_str(in, "policy"))) shell_opt(&b, "--policy"), shell_word(&b, s);
    if ((s = rep_str(in, "alloc_conf_given"))) shell_opt(&b, "--alloc-conf"), shell_word(&b, s);
    if (!isnan(rep_num(in, "capacity_bytes")))
        size_word(&b, "--capacity", rep_num(in, "capacity_bytes"));
    if (!isnan(rep_num(in, "overhead_bytes")))
        size_word(&b, "--overhead", rep_num(in, "overhead_bytes"));
    double mf = rep_num(in, "memory_fraction");
    char num[48];
    if (mf > 0)
        shell_opt(&b, "--memory-fraction"), shell_word(&b, gm_fmt_num(mf, 6, num, sizeof num));
    if ((s = rep_str(in, "on_oom")) && !strcmp(s, "skip")) shell_opt(&b, "--on-oom skip");
    if ((s = rep_str(in, "on_oom")) && !strcmp(s, "chain")) shell_opt(&b, "--on-oom chain");
    if ((s = rep_str(in, "host_tier.link"))) { /* --host-tier (sim/host_tier.h) */
        char ht[160];
        double hs = rep_num(in, "host_tier.size_bytes");
        const char *touch = rep_str(in, "host_tier.touch");
        int n = snprintf(ht, sizeof ht, "%s", s);
        if (hs > 0 && n > 0 && (size_t)n < sizeof ht)
            n += snprintf(ht + n, sizeof ht - (size_t)n, ",size=%.0f", hs);
        if (touch && !strcmp(touch, "none") && n > 0 && (size_t)n < sizeof ht)
            snprintf(ht + n, sizeof ht - (size_t)n, ",touch=none");
        shell_opt(&b, "--host-tier"), shell_word(&b, ht);
    }
    if ((s = rep_str(in, "scope")) && !strcmp(s, "device")) shell_opt(&b, "--scope device");
    if (json_is_true(json_object_get(in, "lenient"))) shell_opt(&b, "--lenient");
    /* Per-trace options apply to the traces after them. Without any, "--"
     * ends the options, so no trace name is read as one; with some, a
     * relative name that starts with '-' is written ./NAME. */
    int per_trace = 0;
    for (size_t k = 0; k < r->nt; k++) {
        json_t *t = r->t[k].j;
        double o = rep_num(t, "offset_ns"), n = rep_num(t, "repeat"), q = rep_num(t, "quota_bytes");
        per_trace |= (!isnan(o) && o != 0) || (!isnan(n) && n != 1) || (!isnan(q) && q != 0);
    }
    if (!per_trace) shell_opt(&b, "--");
    double off = 0, rep = 1, quota = 0;
    for (size_t k = 0; k < r->nt; k++) {
        json_t *t = r->t[k].j;
        double o = rep_num(t, "offset_ns"), n = rep_num(t, "repeat"), q = rep_num(t, "quota_bytes");
        if (!isnan(o) && o != off) {
            snprintf(num, sizeof num, "%.0fns", o);
            shell_opt(&b, "--offset"), shell_word(&b, num);
            off = o;
        }
        if (!isnan(n) && n != rep) {
            shell_opt(&b, "--repeat"), shell_word(&b, gm_fmt_num(n, 0, num, sizeof num));
            rep = n;
        }
        if (!isnan(q) && q != quota) size_word(&b, "--quota", q), quota = q;
        const char *trace = (s = rep_str(t, "trace")) ? s : "?";
        if (per_trace && trace[0] == '-') {
            char *dot = malloc(strlen(trace) + 3);
            if (dot) sprintf(dot, "./%s", trace);
            shell_word(&b, dot ? dot : "?");
            free(dot);
        } else {
            shell_word(&b, trace);
        }
    }
    gm_sb_puts(out, "<pre class=\"cmd\">");
    esc(out, gm_sb_str(&b));
    gm_sb_puts(out, "</pre>");
    gm_sb_free(&b);
}

static void run_inputs(gm_strbuf *b, const rep_run *r)
{
    gm_sb_puts(b, "<details><summary>Inputs of this run, and the command that reproduces "
                  "it</summary>");
    reproduce(b, r);
    gm_sb_puts(b, "<dl class=\"kv\">");
    kv_rows(b, json_object_get(r->j, "inputs"));
    gm_sb_puts(b, "</dl></details>");
}

static void run_card(gm_strbuf *b, const rep *p, size_t k)
{
    const rep_run *r = &p->run[k];
    int win = (int)k == p->winner;
    gm_sb_printf(b, "<section class=\"run%s\" id=\"run-%zu\"><h3>",
                 win              ? " win"
                 : !r->realizable ? " bound"
                                  : "",
                 k);
    if (r->realizable) gm_sb_printf(b, "<span class=\"rank\">#%d</span>", r->rank);
    gm_sb_printf(b, "<span class=\"sw\" style=\"background:%s\"></span>", rep_color(r->color));
    esc(b, r->label);
    if (win) gm_sb_puts(b, "<span class=\"badge win\">winner</span>");
    if (!r->realizable)
        gm_sb_puts(b, "<span class=\"badge bound\">bound \xc2\xb7 uses the future</span>");
    double ooms = rep_num(r->m, "oom_count");
    gm_sb_puts(b, ooms > 0 ? "<span class=\"badge oom\">OOM</span>" : "");
    gm_sb_puts(b, "</h3>");
    kpis(b, p, r);
    legend_memory(b, p, r);
    rep_chart_memory(b, p, k);
    gm_sb_puts(b, "<div class=\"legend\"><span><i class=\"key fill\" style=\"background:#d6bcfa\">"
                  "</i>external fragmentation: 1 \xe2\x88\x92 largest free block / (reserved "
                  "\xe2\x88\x92 allocated)</span><span><i class=\"key dash\" "
                  "style=\"border-color:#8795a1\"></i>reserved but unallocated: 1 \xe2\x88\x92 "
                  "allocated / reserved</span></div>");
    rep_chart_frag(b, p, k);
    rep_segmaps(b, p, k);
    if (p->multi > 1) {
        gm_sb_puts(b, "<div class=\"legend\"><span>Per tenant (one band each, same axes): "
                      "reserved, allocated, requested</span></div>");
        rep_chart_tenants(b, p, k);
        tenant_table(b, p, r);
    }
    oom_table(b, p, r);
    policy_reports(b, r);
    run_inputs(b, r);
    gm_sb_puts(b, "</section>\n");
}

/* ------------------------------------------------------ what was run */

/* An inputs member shared by every run, or "varies" (then each card says). */
static json_t *common_input(const rep *p, const char *key, int *varies)
{
    json_t *v = json_object_get(json_object_get(p->run[0].j, "inputs"), key);
    *varies = 0;
    for (size_t i = 1; i < p->n; i++)
        if (!rep_same(v, json_object_get(json_object_get(p->run[i].j, "inputs"), key))) *varies = 1;
    return v;
}

static void input_row(gm_strbuf *b, const rep *p, const char *label, const char *key)
{
    int varies;
    json_t *v = common_input(p, key, &varies);
    gm_sb_printf(b, "<dt>%s</dt><dd>", label);
    if (varies)
        gm_sb_puts(b, "varies by run (see each run's inputs)");
    else if (!strcmp(key, "alloc_conf_given") && json_is_null(v))
        gm_sb_puts(b, "the trace's own settings");
    else if (!strcmp(key, "memory_fraction") && json_number_value(v) == 0)
        gm_sb_puts(b, "unset");
    else if (!strcmp(key, "latency") && json_is_object(v)) {
        char a[4][48];
        gm_sb_printf(b, "driver malloc %s + %s per GiB, free %s + %s per GiB",
                     gm_fmt_time_auto(rep_num(v, "malloc_base_ns"), a[0], sizeof a[0]),
                     gm_fmt_time_auto(rep_num(v, "malloc_ns_per_gib"), a[1], sizeof a[1]),
                     gm_fmt_time_auto(rep_num(v, "free_base_ns"), a[2], sizeof a[2]),
                     gm_fmt_time_auto(rep_num(v, "free_ns_per_gib"), a[3], sizeof a[3]));
    } else if (json_is_integer(v) && strstr(key, "_bytes")) {
        char s[48];
        gm_sb_printf(b, "%s (%.0f bytes)", gm_fmt_bytes_auto(json_number_value(v), s, sizeof s),
                     json_number_value(v));
    } else
        gm_report_html_value(b, key, v);
    gm_sb_puts(b, "</dd>");
}

static void traces_table(gm_strbuf *b, const rep *p)
{
    const rep_run *r = &p->run[0];
    char v[3][48];
    gm_sb_puts(b, "<table><thead><tr><th class=\"l\">#</th><th class=\"l\">trace</th>"
                  "<th class=\"l\">source</th><th class=\"l\">hash</th><th>events</th>"
                  "<th>offset</th><th>repeat</th><th>quota</th><th class=\"l\">allocator "
                  "settings</th></tr></thead><tbody>");
    for (size_t k = 0; k < r->nt; k++) {
        json_t *t = r->t[k].j;
        double q = rep_num(t, "quota_bytes");
        gm_sb_printf(b, "<tr><td class=\"l\">%zu</td><td class=\"l wrap\"><code>", k);
        esc(b, rep_str(t, "trace"));
        gm_sb_puts(b, "</code></td><td class=\"l wrap\">");
        esc(b, rep_str(t, "source"));
        gm_sb_puts(b, "</td><td class=\"l\"><code>");
        esc(b, rep_str(t, "trace_hash"));
        gm_sb_printf(b,
                     "</code></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                     "<td class=\"l wrap\"><code>",
                     gm_fmt_count(rep_num(t, "trace_events"), v[0], sizeof v[0]),
                     gm_fmt_time_auto(rep_num(t, "offset_ns"), v[1], sizeof v[1]),
                     gm_fmt_num(rep_num(t, "repeat"), 0, v[2], sizeof v[2]),
                     q > 0 ? gm_fmt_bytes_auto(q, v[0], sizeof v[0]) : "none");
        const char *ac = rep_str(t, "alloc_conf");
        esc(b, ac && *ac ? ac : "(defaults)");
        gm_sb_puts(b, "</code></td></tr>");
    }
    gm_sb_puts(b, "</tbody></table>");
}

static void what_was_run(gm_strbuf *b, const rep *p)
{
    json_t *first = p->run[0].j;
    gm_sb_puts(b, "<h2 id=\"inputs\">What was run</h2>");
    traces_table(b, p);
    gm_sb_puts(b, "<div class=\"cols\"><dl class=\"kv\">");
    input_row(b, p, "device capacity", "capacity_bytes");
    input_row(b, p, "context overhead per tenant", "overhead_bytes");
    input_row(b, p, "allocator", "allocator");
    input_row(b, p, "allocator settings given", "alloc_conf_given");
    input_row(b, p, "memory fraction", "memory_fraction");
    input_row(b, p, "on OOM", "on_oom");
    input_row(b, p, "release scope", "scope");
    gm_sb_puts(b, "</dl><dl class=\"kv\"><dt>policies</dt><dd>");
    for (size_t i = 0; i < p->n; i++) {
        const rep_run *r = &p->run[p->order[i]];
        gm_sb_puts(b, i ? ", " : "");
        gm_sb_puts(b, "<code>");
        esc(b, r->policy ? r->policy : r->label);
        gm_sb_puts(b, r->realizable ? "</code>" : "</code> (bound)");
    }
    gm_sb_puts(b, "</dd>");
    input_row(b, p, "lenient", "lenient");
    input_row(b, p, "latency model", "latency");
    gm_sb_puts(b, "<dt>gmsim</dt><dd>");
    esc(b, rep_str(first, "gmsim_version"));
    gm_sb_puts(b, ", backend ");
    esc(b, rep_str(first, "backend"));
    gm_sb_puts(b, ", command <code>");
    esc(b, rep_str(p->root, "command") ? rep_str(p->root, "command") : rep_str(first, "command"));
    gm_sb_puts(b, "</code></dd><dt>created</dt><dd>");
    esc(b, rep_str(p->root, "created_utc") ? rep_str(p->root, "created_utc")
                                           : rep_str(first, "created_utc"));
    gm_sb_puts(b, "</dd></dl></div><p class=\"note\">Each run's card below has its exact inputs "
                  "and the <code>gmsim run</code> command that reproduces it.</p>");
}

/* ------------------------------------------------------------ traces */

static void category_table(gm_strbuf *b, json_t *st)
{
    json_t *cats = json_object_get(st, "categories");
    double tb = 0, tl = 0, mb = 0, ml = 0;
    size_t i;
    json_t *c;
    json_array_foreach(cats, i, c)
    {
        tb += rep_num(c, "bytes");
        tl += rep_num(c, "live_at_peak_bytes");
        mb = fmax(mb, rep_num(c, "bytes"));
        ml = fmax(ml, rep_num(c, "live_at_peak_bytes"));
    }
    gm_unit ub = gm_unit_bytes(mb), ul = gm_unit_bytes(ml);
    char v[4][48];
    gm_sb_printf(b,
                 "<table><thead><tr><th class=\"l\">category</th><th>allocations</th>"
                 "<th>bytes requested, %s</th><th>share</th><th>live at peak, %s</th>"
                 "<th>share</th></tr></thead><tbody>",
                 ub.name, ul.name);
    json_array_foreach(cats, i, c)
    {
        double by = rep_num(c, "bytes"), lv = rep_num(c, "live_at_peak_bytes");
        gm_sb_puts(b, "<tr><td class=\"l\">");
        esc(b, rep_str(c, "category"));
        gm_sb_printf(b, "</td><td>%s</td><td>%.2f",
                     gm_fmt_count(rep_num(c, "allocs"), v[0], sizeof v[0]), by / ub.div);
        gm_sb_printf(b, "<span class=\"bar c\"><i style=\"width:%.1f%%\"></i></span></td>",
                     mb > 0 ? 100 * by / mb : 0);
        gm_sb_printf(b, "<td>%s</td><td>%.2f",
                     gm_fmt_pct(tb > 0 ? by / tb : NAN, v[2], sizeof v[2]), lv / ul.div);
        gm_sb_printf(b, "<span class=\"bar\"><i style=\"width:%.1f%%\"></i></span></td>",
                     ml > 0 ? 100 * lv / ml : 0);
        gm_sb_printf(b, "<td>%s</td></tr>", gm_fmt_pct(tl > 0 ? lv / tl : NAN, v[0], sizeof v[0]));
    }
    gm_sb_puts(b, "</tbody></table>");
}

/* Live bytes at each iteration boundary with the leak fit (README
 * "Iterations and leaks"), when the trace has iterations. */
static void iterations(gm_strbuf *b, json_t *st)
{
    json_t *it = json_object_get(st, "iterations");
    size_t n = json_array_size(json_object_get(it, "boundaries"));
    if (n < 2) return;
    static const struct {
        const char *key, *words;
    } src[] = {{"user-marker", "the markers named by --iteration-marker"},
               {"iteration-markers", "the trace's iteration markers"},
               {"nvtx-range", "a repeated top-level NVTX range"},
               {"period", "the period of live bytes (no markers in the trace)"}};
    const char *s = rep_str(it, "source"), *words = s ? s : "";
    for (size_t i = 0; s && i < sizeof src / sizeof src[0]; i++)
        if (!strcmp(s, src[i].key)) words = src[i].words;
    gm_sb_printf(b,
                 "<h4>Live memory at each iteration boundary</h4><p class=\"note\">%zu "
                 "boundaries, from ",
                 n);
    esc(b, words);
    gm_sb_puts(b, "; the dashed line is the least-squares fit the leak verdict rests on "
                  "(hollow points: warm-up, left out of it).");
    json_t *grow = json_object_get(it, "growing"); /* steepest first (study/leak.h, groups) */
    const char *kind = rep_str(it, "group_kind");
    for (size_t i = 0; i < json_array_size(grow) && i < 5; i++) {
        json_t *g = json_array_get(grow, i);
        char v[32];
        double sl = json_number_value(json_object_get(g, "slope_bytes_per_iteration"));
        gm_sb_printf(b, "%s",
                     i                               ? ", "
                     : kind && !strcmp(kind, "site") ? " Growing call sites: "
                                                     : " Growing categories: ");
        esc(b, json_string_value(json_object_get(g, "name")));
        gm_sb_printf(b, " (+%s per iteration)",
                     gm_fmt_bytes_auto(sl > 0 ? (uint64_t)sl : 0, v, sizeof v));
    }
    if (json_array_size(grow) > 5) gm_sb_printf(b, " and %zu more", json_array_size(grow) - 5);
    gm_sb_puts(b, "</p>");
    rep_chart_iterations(b, st);
}

/* The offset of the first tenant whose statistics st are (its trace's time
 * on the timeline). */
static double stats_offset(const rep *p, json_t *st)
{
    for (size_t i = 0; i < p->n; i++)
        for (size_t k = 0; k < p->run[i].nt; k++)
            if (json_object_get(p->run[i].t[k].j, "trace_stats") == st) {
                double o = rep_num(p->run[i].t[k].j, "offset_ns");
                return isnan(o) ? 0 : o;
            }
    return 0;
}

static const char *const cat_colors[] = {"#9aa5b1", "#4c78a8", "#72b7b2", "#eeca3b",
                                         "#f58518", "#54a24b", "#e45756", "#b279a2"};

/* The largest allocations as bands (the trace's own lifetimes). */
static void alloc_section(gm_strbuf *b, const rep *p, json_t *st, size_t idx)
{
    json_t *top = json_object_get(st, "allocations_top");
    if (!json_is_object(top) || !json_array_size(json_object_get(top, "rows"))) return;
    char v[3][48], id[32];
    int seen[GM_CAT_COUNT] = {0};
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(top, "rows"), i, r)
    {
        int c = gm_category_parse(json_string_value(json_array_get(r, 3)));
        seen[c >= 0 && c < GM_CAT_COUNT ? c : 0] = 1;
    }
    gm_sb_printf(b,
                 "<h4>Live allocations over time</h4><p class=\"note\">%s of %s allocations "
                 "as bands: those that hold the most memory over time and the largest of each "
                 "fortieth of the trace (stacked by size, largest lowest; the same for every "
                 "policy: the trace frees each tensor at the same event); the rest as one grey "
                 "area above them. Hover a band for its size, category, call site and lifetime; "
                 "click to pin it; drag across any time chart to zoom, double-click to reset.</p>"
                 "<div class=\"legend\">",
                 gm_fmt_count(rep_num(top, "shown"), v[0], sizeof v[0]),
                 gm_fmt_count(rep_num(top, "allocations"), v[1], sizeof v[1]));
    for (int c = 0; c < GM_CAT_COUNT; c++)
        if (seen[c])
            gm_sb_printf(b, "<span><i class=\"key fill\" style=\"background:%s\"></i>%s</span>",
                         cat_colors[c], gm_category_name(c));
    gm_sb_puts(b, "<span><i class=\"key fill\" style=\"background:#cbd2d9\"></i>the other "
                  "allocations (max per column)</span></div>");
    snprintf(id, sizeof id, "alloc-%zu", idx);
    rep_chart_allocs(b, p, top, stats_offset(p, st), id);
    gm_sb_printf(b, "<p class=\"al-tip\" id=\"%s-tip\" aria-live=\"polite\"></p>", id);
}

static void trace_section(gm_strbuf *b, const rep *p, json_t *st, size_t idx)
{
    char v[4][48];
    gm_sb_puts(b, "<section class=\"trace\"><h3><code>");
    esc(b, rep_str(st, "path"));
    gm_sb_puts(b, "</code></h3><dl class=\"kv\"><dt>source</dt><dd>");
    esc(b, rep_str(st, "meta.source"));
    gm_sb_puts(b, "</dd><dt>recorded on</dt><dd>");
    /* only what the trace knows: a name, a size, a date, each when recorded */
    const char *dev = rep_str(st, "meta.device_name"), *when = rep_str(st, "meta.created_utc");
    double total = rep_num(st, "meta.device_total_bytes");
    int parts = 0;
    if (dev && *dev) esc(b, dev), parts++;
    if (total > 0)
        gm_sb_printf(b, "%s%s device memory", parts++ ? ", " : "",
                     gm_fmt_bytes_auto(total, v[0], sizeof v[0]));
    if (when && *when) {
        gm_sb_puts(b, parts++ ? ", trace made " : "trace made ");
        esc(b, when);
    }
    if (!parts) gm_sb_puts(b, "not recorded in the trace");
    gm_sb_puts(b, "</dd><dt>command</dt><dd><code>");
    esc(b, rep_str(st, "meta.command"));
    gm_sb_puts(b, "</code></dd><dt>workload</dt><dd class=\"workload\">");
    gm_sb_esc_max(b, rep_str(st, "meta.workload"), 2000);
    if (rep_num(st, "events") > 0)
        gm_sb_printf(b,
                     "</dd><dt>events</dt><dd>%s (%s allocations, %s requested in all); peak "
                     "live %s</dd></dl>",
                     gm_fmt_count(rep_num(st, "events"), v[0], sizeof v[0]),
                     gm_fmt_count(rep_num(st, "allocations"), v[1], sizeof v[1]),
                     gm_fmt_bytes_auto(rep_num(st, "alloc_bytes"), v[2], sizeof v[2]),
                     gm_fmt_bytes_auto(rep_num(st, "peak_live_bytes"), v[3], sizeof v[3]));
    else /* a state-only snapshot: what was live at the one instant it holds */
        gm_sb_printf(b,
                     "</dd><dt>events</dt><dd>none: the trace holds the state at one instant, "
                     "%s live in tensors</dd></dl>",
                     gm_fmt_bytes_auto(rep_num(st, "peak_live_bytes"), v[3], sizeof v[3]));
    alloc_section(b, p, st, idx);
    gm_sb_puts(b, "<h4>Allocation sizes</h4>");
    gm_sb_puts(b, "<div class=\"legend\"><span><i class=\"key fill\" style=\"background:#2b6cb0\">"
                  "</i>share of allocations</span><span><i class=\"key fill\" "
                  "style=\"background:#dd6b20\"></i>share of bytes requested</span></div>");
    rep_chart_sizes(b, st);
    category_table(b, st);
    iterations(b, st);
    gm_sb_puts(b, "</section>\n");
}

static void traces(gm_strbuf *b, const rep *p)
{
    json_t *st[MAX_TRACES];
    size_t n = rep_trace_stats(p, st, MAX_TRACES);
    gm_sb_puts(b, "<h2 id=\"traces\">The workload</h2>");
    if (n == 0) {
        gm_sb_puts(b, "<p class=\"note\">No trace statistics in these results (they are added "
                      "by <code>run --html</code> and <code>compare --html</code>, or by "
                      "<code>gmsim report --trace-stats</code> where the traces are "
                      "readable).</p>");
        return;
    }
    for (size_t i = 0; i < n; i++)
        trace_section(b, p, st[i], i);
}

static void definitions(gm_strbuf *b)
{
    gm_sb_puts(
        b, "<h2 id=\"definitions\">What the numbers mean</h2><dl class=\"kv\">"
           "<dt>requested (live)</dt><dd>bytes of live tensors as requested; its peak is the "
           "limit no allocator can go below</dd>"
           "<dt>allocated</dt><dd>bytes of live blocks after the allocator's rounding</dd>"
           "<dt>reserved</dt><dd>bytes held from the driver (segments); device used = reserved + "
           "context overhead of every tenant</dd>"
           "<dt>fragmentation</dt><dd>1 \xe2\x88\x92 peak allocated / peak reserved (GMLake's "
           "definition)</dd>"
           "<dt>utilization</dt><dd>time-weighted allocated / reserved</dd>"
           "<dt>external fragmentation</dt><dd>1 \xe2\x88\x92 largest free block / (reserved "
           "\xe2\x88\x92 allocated), sampled once per timeline bucket</dd>"
           "<dt>OOM</dt><dd>an allocation that failed after the policy and the allocator did all "
           "they could</dd>"
           "<dt>driver calls, time</dt><dd>cudaMalloc / cudaFree calls and their modelled time</dd>"
           "<dt>charts</dt><dd>every line point is the maximum over its time column, so no peak is "
           "lost; the shaded bands reach down to the column's minimum, so troughs are not either; "
           "all runs share the axes (the memory axis starts near the data when the data sit "
           "high on it: the legend says so); hover a chart to read every chart at that "
           "instant, drag across one to zoom every time chart, double-click to reset</dd></dl>");
}

/* The run ranked before order position i whose reserved line is identical
 * (so it hides under it in the overlay), or NULL. */
static const rep_run *same_line(const rep *p, size_t i)
{
    const rep_run *r = &p->run[p->order[i]];
    for (size_t k = 0; r->cols && k < i; k++) {
        const rep_run *o = &p->run[p->order[k]];
        if (o->cols && !memcmp(o->cols->r, r->cols->r, sizeof r->cols->r)) return o;
    }
    return NULL;
}

/* ------------------------------------------- pages of other documents */

void rep_page_open(gm_strbuf *b, const char *title, char *nce, size_t len)
{
    nonce(nce, len);
    gm_sb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    gm_sb_printf(b,
                 "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                 "style-src 'unsafe-inline'; script-src 'nonce-%s'; img-src data:\">",
                 nce);
    gm_sb_puts(b, "<meta name=\"generator\" content=\"gmsim " GM_VERSION "\"><title>");
    esc(b, title);
    gm_sb_printf(b, "</title><style>%s</style></head><body><main>\n", css);
}

void rep_page_close(gm_strbuf *b, const char *nce)
{
    gm_sb_printf(b,
                 "<p class=\"note\">Made by gmsim %s; this file is self-contained and "
                 "works offline.</p></main><script nonce=\"%s\">%s</script></body></html>\n",
                 GM_VERSION, nce, script);
}

/* ---------------------------------------------------------------- API */

int gm_html_render(json_t *result, gm_strbuf *out, gm_err *err)
{
    const char *schema = rep_str(result, "schema");
    if (schema && !strcmp(schema, "gmsim-fit/1")) return rep_fit_page(result, out, err);
    if (schema && !strcmp(schema, "gmsim-tune/1")) return rep_tune_page(result, out, err);
    rep p;
    char msg[512];
    if (rep_build(&p, result, msg, sizeof msg) != 0) {
        rep_free(&p);
        return gm_errf(err, GM_EINVAL, "cannot make a report: %s", msg);
    }
    char nce[40] = {0};
    nonce(nce, sizeof nce);
    page_head(out, &p, nce);
    title_block(out, &p);
    verdict(out, &p);
    comparison_table(out, &p);
    if (p.n > 1) {
        gm_sb_puts(out, "<h2 id=\"strips\">Reserved memory over time, one strip per run</h2><div "
                        "class=\"legend\" id=\"ov-legend\">");
        for (size_t i = 0; i < p.n; i++) {
            const rep_run *r = &p.run[p.order[i]];
            gm_sb_printf(out, "<span><i class=\"key%s\" style=\"border-color:%s\"></i>",
                         r->realizable ? "" : " dash", rep_color(r->color));
            esc(out, r->label);
            const rep_run *twin = same_line(&p, i);
            if (twin) { /* the same memory over time: say so */
                gm_sb_puts(out, " (same as ");
                esc(out, twin->label);
                gm_sb_puts(out, ")");
            }
            gm_sb_puts(out, " <b class=\"lv\"></b></span>");
        }
        gm_sb_puts(out, "<span><i class=\"key\" style=\"border-color:#1a202c\"></i>requested "
                        "(live) <b class=\"lv\"></b></span><span><i class=\"key dot\" "
                        "style=\"border-color:#1a202c\">"
                        "</i>limit: peak live</span><span><i class=\"key dash\" "
                        "style=\"border-color:#8795a1\"></i>pytorch, the baseline</span></div>");
        rep_chart_multiples(out, &p);
    }
    gm_sb_printf(out, "<h2 id=\"runs\">%s</h2>", p.n > 1 ? "Each run over time" : "Over time");
    for (int bound = 0; bound < 2; bound++) /* realizable runs, then the bounds */
        for (size_t i = 0; i < p.n; i++)
            if (p.run[p.order[i]].realizable == !bound) run_card(out, &p, p.order[i]);
    traces(out, &p);
    what_was_run(out, &p);
    definitions(out);
    gm_sb_puts(out, "<button id=\"zr\" type=\"button\" hidden>reset zoom</button>");
    gm_sb_printf(out,
                 "<p class=\"note\">Made by gmsim %s; this file is self-contained and "
                 "works offline.</p></main><script nonce=\"%s\">%s</script></body></html>\n",
                 GM_VERSION, nce, script);
    rep_free(&p);
    if (out->failed) return gm_errf(err, GM_ENOMEM, "out of host memory while writing the report");
    return GM_OK;
}

int gm_html_write_file(json_t *result, const char *path, gm_err *err)
{
    gm_strbuf b;
    gm_sb_init(&b);
    int rc = gm_html_render(result, &b, err);
    if (rc != GM_OK) {
        gm_sb_free(&b);
        return rc;
    }
    rc = gm_out_write_all(path, b.s, b.len, err);
    gm_sb_free(&b);
    return rc;
}
