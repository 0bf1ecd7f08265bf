// The page of sqscope diff --html, after the helpers of common.js: draws
// the totals and each QP's figures, before and after, as bars in SVG from
// the comparison the page embeds (the document diff --json writes).
var rep = data.diff;
var figs = [
  { key: "wrs", name: "WRs", dec: 0 },
  { key: "wrs_per_doorbell", name: "WRs per doorbell", dec: 2 },
  { key: "inline_pct", name: "inline", dec: 1, unit: "%", top: 100 },
  { key: "signaled_pct", name: "signaled", dec: 1, unit: "%", top: 100 },
  { key: "pcie_bytes_per_wr", name: "PCIe bytes per WR", dec: 1 },
  { key: "peak_outstanding", name: "peak outstanding", dec: 0, limit: "depth" },
  { key: "enomem", name: "ENOMEM", dec: 0 }
];

// why says why a side does not give a figure.
function why(side, which, key) {
  if (!side) return "no such QP in the " + which + " recording";
  return (side.absent || {})[key] || "not given";
}
function given(side, key) { return side && side[key] !== null && side[key] !== undefined; }

// bars draws each figure of two sides as a pair of bars on the figure's
// own scale (a share on 0-100%, the peak against max_send_wr, marked); a
// figure a side does not give is written n/a with its reason.
function bars(title, b, a) {
  var W = 760, L = 150, MAXW = 330, BH = 12, GAP = 3, ROW = 2 * BH + GAP + 12, T = 6;
  var svg = sv("svg", { viewBox: "0 0 " + W + " " + (T + figs.length * ROW), width: W, height: T + figs.length * ROW, "class": "bars", role: "img" });
  svg.appendChild(sv("title", {}, title));
  var sides = [["before", b], ["after", a]];
  figs.forEach(function (f, k) {
    var y0 = T + k * ROW, top = f.top || 0;
    sides.forEach(function (s) {
      if (given(s[1], f.key)) top = Math.max(top, s[1][f.key]);
      if (f.limit && given(s[1], f.limit)) top = Math.max(top, s[1][f.limit]);
    });
    svg.appendChild(sv("text", { x: 4, y: y0 + BH + 2, "class": "figname" }, f.name));
    sides.forEach(function (s, j) {
      var side = s[1], y = y0 + j * (BH + GAP);
      if (!given(side, f.key)) {
        svg.appendChild(sv("text", { x: L, y: y + BH - 2, "class": "absent " + s[0] }, s[0] + " n/a: " + why(side, s[0], f.key)));
        return;
      }
      var v = side[f.key], w = top > 0 ? v / top * MAXW : 0, text = fmt(v, f.dec) + (f.unit || "");
      if (f.limit && given(side, f.limit)) {
        var x = L + side[f.limit] / top * MAXW;
        svg.appendChild(sv("line", { x1: x, x2: x, y1: y - 1, y2: y + BH + 1, "class": "limit" }));
        text += " of " + side[f.limit];
      } else if (f.limit) {
        text += " of max_send_wr n/a: " + why(side, s[0], f.limit);
      }
      var r = sv("rect", { x: L, y: y, width: w.toFixed(1), height: BH, "class": "bar " + s[0] });
      r.appendChild(sv("title", {}, s[0] + ": " + f.name + " " + text));
      svg.appendChild(r);
      svg.appendChild(sv("text", { x: L + w + 4, y: y + BH - 2, "class": "value " + s[0] }, text));
    });
  });
  return svg;
}

function kinds(c, what, k) {
  c.appendChild(el("p", {}, what + ": " + (k.length ? k.join(", ") : "none")));
}

function settingsText(s) {
  return "inline up to " + s.inline_up_to_bytes + " B, signal every " + s.signal_every + " WR(s), " +
    s.wrs_per_post + " WR(s) per post call, max_send_wr " + s.max_send_wr;
}

// settings says what diff infers of each side's settings and what changed.
function settings(c, q) {
  [["before", q.before], ["after", q.after]].forEach(function (s) {
    if (!s[1]) return;
    if (s[1].settings) c.appendChild(el("p", { "class": "settings" }, "Settings inferred " + s[0] + ": " + settingsText(s[1].settings) + "."));
    else c.appendChild(el("p", { "class": "absent" }, "Settings not inferred " + s[0] + ": " + s[1].settings_not_inferred + "."));
  });
  if (q.settings_changed.length) {
    var ul = el("ul", { "class": "changed" });
    q.settings_changed.forEach(function (ch) { ul.appendChild(el("li", {}, ch.setting + ": " + ch.before + " -> " + ch.after)); });
    c.appendChild(el("p", {}, "Settings that changed:"));
    c.appendChild(ul);
  } else if (q.before && q.after && q.before.settings && q.after.settings) {
    c.appendChild(el("p", {}, "Settings unchanged (inline threshold, signal interval, post list, depth)."));
  }
}

function card(i) {
  var q = rep.qps[i];
  return cardOf(i, data.labels[i], function (c) {
    c.appendChild(bars("Before and after of " + data.labels[i], q.before, q.after));
    kinds(c, "Diagnoses that appeared", q.diagnoses_appeared);
    kinds(c, "Diagnoses that went", q.diagnoses_went);
    settings(c, q);
  });
}

document.getElementById("total-bars").appendChild(bars("In total, before and after", rep.total.before, rep.total.after));
wireQPs(data.labels, card);
