// A small DOM for running the script of a page sqscope writes (report
// --html, diff --html) under node, when no browser is at hand: it builds the page's elements the script reads
// from the page's own text, runs the script, works its controls and
// prints what it drew as JSON. Any exception fails the run.
"use strict";
const fs = require("fs");
const page = fs.readFileSync(process.argv[2], "utf8");

class Node {
  constructor(tag, ns) {
    this.tagName = tag; this.ns = ns || ""; this.attrs = {}; this.children = []; this.handlers = {};
    this.style = {}; this.parent = null; this._text = "";
  }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  getAttribute(k) { return k in this.attrs ? this.attrs[k] : null; }
  hasAttribute(k) { return k in this.attrs; }
  appendChild(c) {
    if (c.parent) c.parent.children.splice(c.parent.children.indexOf(c), 1);
    c.parent = this; this.children.push(c); return c;
  }
  remove() { if (this.parent) this.parent.children.splice(this.parent.children.indexOf(this), 1); this.parent = null; }
  addEventListener(type, fn) { (this.handlers[type] = this.handlers[type] || []).push(fn); }
  fire(type, ev) { (this.handlers[type] || []).forEach((fn) => fn(Object.assign({ target: this }, ev || {}))); }
  get textContent() { return this._text + this.children.map((c) => c.textContent).join(""); }
  set textContent(t) { this._text = String(t); this.children.forEach((c) => { c.parent = null; }); this.children = []; }
  closest(tag) { for (let n = this; n; n = n.parent) if (n.tagName === tag) return n; return null; }
  scrollIntoView() {}
  all(pred, out) { out = out || []; if (pred(this)) out.push(this); this.children.forEach((c) => c.all(pred, out)); return out; }
}

const byId = {};
function mk(tag, id) { const n = new Node(tag); if (id) { n.attrs.id = id; byId[id] = n; } return n; }
const data = page.match(/<script type="application\/json" id="sqscope-data">([\s\S]*?)<\/script>/);
if (!data) throw new Error("no data script");
mk("script", "sqscope-data")._text = data[1];
mk("div", "cards"); mk("select", "pick"); mk("input", "filter").value = ""; mk("span", "shown");
// the rows of the QP table, which a browser running script reads as the
// text of their <noscript>
const rows = page.match(/<noscript id="qprows">([\s\S]*?)<\/noscript>/);
if (!rows) throw new Error("no table rows (noscript#qprows)");
mk("noscript", "qprows")._text = rows[1];
mk("div", "qpview");

// any other element a page's script draws into (diff's #total-bars)
const drawn = (page.match(/<div id="[^"]+"/g) || []).map((d) => d.slice(9, -1)).filter((id) => !byId[id]);
drawn.forEach((id) => mk("div", id));

global.document = {
  getElementById: (id) => byId[id] || Object.values(byId).map((n) => n.all((c) => c.attrs.id === id)[0]).find(Boolean) || null,
  createElement: (tag) => new Node(tag),
  createElementNS: (ns, tag) => new Node(tag, ns),
  createTextNode: (t) => { const n = new Node("#text"); n._text = t; return n; },
};

const script = page.match(/<script>\/\/<!\[CDATA\[([\s\S]*?)\/\/\]\]><\/script>/);
if (!script) throw new Error("no page script");
new Function(script[1])();

// what a card (or any element) holds of what the scripts draw
function drawing(c) {
  const cls = (n) => n.getAttribute("class") || "";
  const lines = c.all((n) => n.tagName === "path" && cls(n) === "line");
  return {
    id: c.getAttribute("id"),
    svgs: c.all((n) => n.tagName === "svg").length,
    band: c.all((n) => n.tagName === "path" && cls(n) === "band").length,
    lineYs: lines.map((l) => (l.getAttribute("d").match(/,[-\d.]+/g) || []).map((s) => Number(s.slice(1)))),
    limitY: c.all((n) => cls(n) === "limit").map((n) => Number(n.getAttribute("y1"))),
    fails: c.all((n) => cls(n) === "fail").length,
    marks: c.all((n) => /^mark/.test(cls(n))).length,
    bars: c.all((n) => n.tagName === "rect" && /^bar /.test(cls(n))).map((n) => ({ cls: cls(n), width: Number(n.getAttribute("width")) })),
    text: c.textContent,
  };
}
function cards() { return byId.cards.children.map(drawing); }
const out = { opened: cards().map((c) => c.id) };
// the table the script made of the rows: a page of them, a button for more
const table = document.getElementById("qptable"), head = table.children[0].children[0], body = table.children[1];
const more = document.getElementById("qpmore"), shownRows = () => body.children.map((r) => r.getAttribute("data-qp"));
out.rows = shownRows(); out.shown = byId.shown.textContent;
out.more = more.style.display === "none" ? "" : more.textContent;
if (out.more) { more.fire("click"); out.rowsAfterMore = shownRows().length; }
// sort by the QP column twice (descending), filter, plot another QP, remove one
head.children[2].fire("click"); head.children[2].fire("click");
out.sortedFirst = body.children.length ? body.children[0].getAttribute("data-qp") : "";
byId.filter.value = "zzz-no-such-text"; byId.filter.fire("input");
out.shownNone = byId.shown.textContent;
byId.filter.value = ""; byId.filter.fire("input");
out.shownAll = byId.shown.textContent;
if (body.children.length) {
  byId.pick.value = String(body.children.length - 1); byId.pick.fire("change");
  body.fire("click", { target: body.children[0].children[0] });
}
out.cards = cards();
out.drawn = {};
drawn.forEach((id) => { out.drawn[id] = drawing(byId[id]); });
process.stdout.write(JSON.stringify(out));
