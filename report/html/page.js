// The page of sqscope report --html, after the helpers of common.js:
// draws each QP's plots over time, as SVG, from the JSON the page embeds.
// unruns reads a series written as runs: "v" or "v*n", comma-separated.
function unruns(s) {
  var out = [];
  s.split(",").forEach(function (tok) {
    var p = tok.split("*"), v = Number(p[0]), n = p.length > 1 ? Number(p[1]) : 1;
    for (var i = 0; i < n; i++) out.push(v);
  });
  return out;
}
function secs(t) { return "+" + t.toFixed(t >= 1 ? 3 : 6) + " s"; }

// niceTicks returns about n round values from lo to hi, and the
// decimals that write them.
function niceTicks(lo, hi, n) {
  if (!(hi > lo)) return { v: [lo], dec: 0 };
  var raw = (hi - lo) / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
  var m = raw / p, step = (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  var out = [];
  for (var k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-6; k++) out.push(k * step);
  return { v: out, dec: Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) };
}

// plot draws one series over the whole run: a band from lo to hi per
// bucket (lo may be null), an optional dashed limit, ticks of failures
// and diagnoses under the axis.
function plot(o) {
  var W = 760, H = 210, L = 56, R = 12, T = 12, B = 44;
  var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, "class": "plot", role: "img" });
  svg.appendChild(sv("title", {}, o.title));
  // the QP's own time in the run, in seconds into the trace
  var t0 = o.t0, span = o.t0 + Math.max(o.hi.length, 1) * data.step_s;
  var top = 0;
  for (var i = 0; i < o.hi.length; i++) top = Math.max(top, o.hi[i]);
  if (o.limit) top = Math.max(top, o.limit);
  top = top > 0 ? top * 1.08 : 1;
  function X(t) { return L + (t - t0) / (span - t0 || 1) * (W - L - R); }
  function Y(v) { return H - B - v / top * (H - T - B); }
  var yt = niceTicks(0, top, 4);
  yt.v.forEach(function (v) {
    svg.appendChild(sv("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), "class": "grid" }));
    svg.appendChild(sv("text", { x: L - 4, y: Y(v) + 4, "text-anchor": "end" }, v.toFixed(yt.dec)));
  });
  var xt = niceTicks(t0, span, 6);
  xt.v.forEach(function (t) {
    svg.appendChild(sv("text", { x: X(t), y: H - B + 14, "text-anchor": "middle" }, "+" + t.toFixed(xt.dec) + " s"));
  });
  svg.appendChild(sv("text", { x: 4, y: T + 2, "class": "ylabel" }, o.ylabel));
  var up = "", down = "";
  for (i = 0; i < o.hi.length; i++) {
    var x0 = X(o.t0 + i * data.step_s), x1 = X(o.t0 + (i + 1) * data.step_s);
    up += (i ? "L" : "M") + x0.toFixed(1) + "," + Y(o.hi[i]).toFixed(1) + "L" + x1.toFixed(1) + "," + Y(o.hi[i]).toFixed(1);
    if (o.lo) down = "L" + x1.toFixed(1) + "," + Y(o.lo[i]).toFixed(1) + "L" + x0.toFixed(1) + "," + Y(o.lo[i]).toFixed(1) + down;
  }
  if (o.lo && up) svg.appendChild(sv("path", { d: up + down + "Z", "class": "band" }));
  if (up) svg.appendChild(sv("path", { d: up, "class": "line" }));
  if (o.limit) {
    svg.appendChild(sv("line", { x1: L, x2: W - R, y1: Y(o.limit), y2: Y(o.limit), "class": "limit" }));
    svg.appendChild(sv("text", { x: W - R - 2, y: Y(o.limit) - 3, "text-anchor": "end", "class": "limitlabel" }, "max_send_wr " + o.limit));
  }
  (o.fails || []).forEach(function (f) {
    var t = o.t0 + f[0] * data.step_s;
    var m = sv("rect", { x: X(t), y: H - B + 18, width: Math.max(2, X(t + data.step_s) - X(t)), height: 8, "class": "fail" });
    m.appendChild(sv("title", {}, f[1] + " failed post call(s) from " + secs(t)));
    svg.appendChild(m);
  });
  (o.marks || []).forEach(function (m) {
    var x = Math.min(W - R, Math.max(L, X(m.t))), tri = sv("path", { d: "M" + x + "," + (H - B + 28) + "l-5,9h10z", "class": "mark " + m.severity });
    tri.appendChild(sv("title", {}, m.text));
    svg.appendChild(tri);
  });
  svg.appendChild(sv("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, "class": "axis" }));
  return svg;
}

var savingNames = [
  ["doorbells_saved", "doorbells saved by batching"],
  ["wqe_fetches_saved_batching", "WQE fetches saved by batching"],
  ["wqe_fetches_saved_blueflame", "WQE fetches saved by BlueFlame"],
  ["payload_reads_saved_inline", "payload reads saved by inline"],
  ["cqe_writes_saved_unsignaled", "CQE writes saved by unsignaled WRs"]
];

function pcieBlock(q) {
  var d = el("div", { "class": "pcie" });
  d.appendChild(el("h4", {}, "PCIe transactions saved, by cause"));
  if (q.pcie === null) {
    d.appendChild(el("p", { "class": "absent" }, "Not given: no PCIe model applies to this QP's provider (see the notes below)."));
    return d;
  }
  var most = 0;
  savingNames.forEach(function (s) { if (s[0] in q.pcie) most = Math.max(most, q.pcie[s[0]]); });
  savingNames.forEach(function (s) {
    if (!(s[0] in q.pcie)) return;
    var row = el("div", { "class": "bar" });
    row.appendChild(el("span", { "class": "what" }, s[1]));
    var b = el("span", { "class": "fill" });
    b.style.width = (most ? 100 * q.pcie[s[0]] / most : 0) * 2.4 + "px";
    row.appendChild(b);
    row.appendChild(el("span", { "class": "n" }, String(q.pcie[s[0]])));
    d.appendChild(row);
  });
  if ("bytes_saved" in q.pcie) {
    d.appendChild(el("p", {}, "bytes saved in all: " + q.pcie.bytes_saved + " (" + fmt(q.pcie.bytes_saved_pct, 1) + "% of the baseline, estimated)"));
  } else {
    d.appendChild(el("p", { "class": "absent" }, "bytes saved: not measured in this mode"));
  }
  return d;
}

// peakBound marks a peak that is a bound: lower (WRs posted before the
// attach unknown), upper (completions past the poll record bound), or
// neither with both.
function peakBound(q) {
  if (q.peak_lower_bound && q.peak_upper_bound) return "~";
  if (q.peak_lower_bound) return ">= ";
  return q.peak_upper_bound ? "<= " : "";
}

function card(i) {
  var q = data.qps[i];
  return cardOf(i, q.label, function (c) {
    var marks = [];
    (q.diags || []).forEach(function (k) {
      var g = data.diagnoses[k], what = g.severity + " " + g.kind;
      marks.push({ t: g.first_s, severity: g.severity, text: what + ", first at " + secs(g.first_s) });
      if (g.count > 1) marks.push({ t: g.last_s, severity: g.severity, text: what + ", last at " + secs(g.last_s) + " (" + g.count + " times)" });
    });
    if (q.occ) {
      c.appendChild(plot({ title: "WRs outstanding of " + q.label, ylabel: "WRs outstanding", t0: q.occ.t0, hi: unruns(q.occ.max), lo: unruns(q.occ.min),
        limit: q.depth, fails: q.fails, marks: marks }));
      c.appendChild(el("p", { "class": "note" }, "Downsampled: each step is the fewest to the most WRs outstanding in a bucket of " +
        (data.step_s * 1e3).toPrecision(3) + " ms, so no peak is lost. Red: failed posts; triangles: diagnoses (first and last)."));
      c.appendChild(plot({ title: "WRs posted per second of " + q.label, ylabel: "WRs/s", t0: q.occ.t0,
        hi: unruns(q.occ.wrs).map(function (n) { return n / data.step_s; }) }));
    } else {
      c.appendChild(el("p", { "class": "absent" }, "No occupancy over time: " + q.no_occ));
    }
    var facts = el("ul", { "class": "facts" });
    [["WRs", q.wrs], ["WRs/s", fmt(q.wrs_per_s)], ["doorbells/s", fmt(q.doorbells_per_s)],
     ["WRs per doorbell", fmt(q.wrs_per_doorbell, 2)], ["inline", fmt(q.inline_pct, 1) + "%"],
     ["signaled", fmt(q.signaled_pct, 1) + "%"],
     ["peak outstanding", peakBound(q) + fmt(q.peak) + (q.depth ? " of " + q.depth : " (depth unknown)")],
     ["ENOMEM", q.enomem]].forEach(function (f) {
      facts.appendChild(el("li", {}, f[0] + ": " + f[1]));
    });
    c.appendChild(facts);
    c.appendChild(pcieBlock(q));
    (q.diags || []).forEach(function (k) {
      var g = data.diagnoses[k], p = el("p", { "class": "diagref " + g.severity });
      var a = el("a", { href: "#diag-" + k }, g.severity + " " + g.kind);
      p.appendChild(a);
      p.appendChild(document.createTextNode(" at " + secs(g.first_s) + ": " + g.message + " Fix: " + g.fix));
      c.appendChild(p);
    });
    (q.notes || []).forEach(function (n) { c.appendChild(el("p", { "class": "note" }, data.notes[n])); });
  });
}

wireQPs(data.qps.map(function (q) { return q.label; }), card);
