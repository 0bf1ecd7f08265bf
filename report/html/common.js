// The helpers every sqscope page shares (report --html, diff --html),
// read into one closure with the page's own script after them: the data
// in #sqscope-data, elements and SVG, figures that may be absent, cards
// that open and close, the list that opens one, the QP table shown a
// page of rows at a time, sorted and filtered over all. No library,
// nothing fetched: a page works from a file, offline.
var data = JSON.parse(document.getElementById("sqscope-data").textContent);
var svgNS = "http://www.w3.org/2000/svg";

function el(tag, attrs, text) {
  var e = document.createElement(tag);
  for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function sv(tag, attrs, text) {
  var e = document.createElementNS(svgNS, tag);
  for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
// fmt writes a figure with d decimals, "n/a" when it is not given.
function fmt(v, d) {
  if (v === null || v === undefined) return "n/a";
  return Number(v).toFixed(d === undefined ? 0 : d);
}

// cardOf returns the card of QP i in #cards, made by fill (which adds
// what follows its heading) the first time it is asked for.
var cards = document.getElementById("cards");
function cardOf(i, title, fill) {
  var id = "qp-card-" + i, old = document.getElementById(id);
  if (old) return old;
  var c = el("div", { "class": "card", id: id });
  var h = el("h3", {}, title);
  var x = el("button", { type: "button", title: "remove this card" }, "×");
  x.addEventListener("click", function () { c.remove(); });
  h.appendChild(x);
  c.appendChild(h);
  fill(c);
  cards.appendChild(c);
  return c;
}

// wireQPs lists every QP in #pick, opens the cards of data.plot and
// shows the QP table (showTable); picking a QP or clicking its row opens
// its card (open(i) returns it).
function wireQPs(labels, open) {
  var pick = document.getElementById("pick");
  labels.forEach(function (l, i) { pick.appendChild(el("option", { value: String(i) }, l)); });
  pick.addEventListener("change", function () {
    if (pick.value !== "") open(Number(pick.value)).scrollIntoView();
  });
  data.plot.forEach(open);
  showTable(open);
}

// The rows a table shows at first, and how many more a click adds: a
// browser takes seconds to lay out thousands at once.
var firstRows = 200, moreRows = 1000;

// unesc reads back text the page writes escaped.
function unesc(s) {
  return s.replace(/&(lt|gt|quot|#34|#39|amp);/g, function (_, e) {
    return { lt: "<", gt: ">", quot: "\"", "#34": "\"", "#39": "'", amp: "&" }[e];
  });
}

// showTable makes #qptable in #qpview of the rows of #qprows (text while
// script runs: a row a line), firstRows of them at first, and sorts (a
// heading clicked: by it, again: the other way) and filters (#filter,
// text in any cell) over all of them; a button shows more.
function showTable(open) {
  var src = document.getElementById("qprows"), text = src.textContent;
  var view = document.getElementById("qpview"), shown = document.getElementById("shown");
  var table = el("table", { id: "qptable" }), head = el("tr"), body = el("tbody"), thead = el("thead");
  var more = el("button", { type: "button", id: "qpmore" });
  thead.appendChild(head);
  table.appendChild(thead);
  table.appendChild(body);
  var heads = [], rows = [], m, re = /<th data-col="\d+">([^<]*)<\/th>/g;
  while ((m = re.exec(text)) !== null) heads.push(unesc(m[1]));
  text.split("\n").forEach(function (line) {
    var r = /^<tr data-qp="(\d+)"(?: class="([^"]*)")?>/.exec(line);
    if (r) rows.push({ qp: r[1], cls: r[2] || "", line: line.slice(r[0].length), cells: null, tr: null, text: null });
  });
  // cellsOf reads a row's cells, when first needed: text, sort value, title
  function cellsOf(r) {
    if (r.cells) return r.cells;
    var re = /<td(?: data-v="([^"]*)")?(?: title="([^"]*)")?>([^<]*)<\/td>/g, m;
    r.cells = [];
    while ((m = re.exec(r.line)) !== null) r.cells.push({ v: m[1] === undefined ? null : Number(m[1]), title: m[2], text: unesc(m[3]) });
    return r.cells;
  }
  function trOf(r) {
    if (r.tr) return r.tr;
    r.tr = el("tr", r.cls ? { "data-qp": r.qp, "class": r.cls } : { "data-qp": r.qp });
    cellsOf(r).forEach(function (c) {
      var a = {};
      if (c.v !== null) a["data-v"] = String(c.v);
      if (c.title !== undefined) a.title = unesc(c.title);
      r.tr.appendChild(el("td", a, c.text));
    });
    return r.tr;
  }
  var order = rows.slice(), limit = firstRows, dir = {}, filter = document.getElementById("filter");
  function render() {
    var f = filter.value.toLowerCase(), hits = order;
    if (f !== "") {
      hits = order.filter(function (r) {
        if (r.text === null) r.text = cellsOf(r).map(function (c) { return c.text; }).join("\n").toLowerCase();
        return r.text.indexOf(f) >= 0;
      });
    }
    body.textContent = "";
    hits.slice(0, limit).forEach(function (r) { body.appendChild(trOf(r)); });
    shown.textContent = hits.length + " of " + rows.length + " QPs" +
      (hits.length > limit ? ", the first " + limit + " shown" : "");
    var rest = hits.length - limit;
    more.textContent = "show " + Math.min(rest, moreRows) + " more of " + rest;
    more.style.display = rest > 0 ? "" : "none";
  }
  heads.forEach(function (h, col) {
    var th = el("th", { "data-col": String(col) }, h);
    th.addEventListener("click", function () {
      dir[col] = -(dir[col] || -1);
      var d = dir[col];
      order.sort(function (a, b) {
        var x = cellsOf(a)[col], y = cellsOf(b)[col];
        if (x.v !== null && y.v !== null) return d * (x.v - y.v);
        return d * x.text.localeCompare(y.text);
      });
      render();
    });
    head.appendChild(th);
  });
  filter.addEventListener("input", function () { limit = firstRows; render(); });
  more.addEventListener("click", function () { limit += moreRows; render(); });
  body.addEventListener("click", function (e) {
    var r = e.target.closest("tr");
    if (r) open(Number(r.getAttribute("data-qp"))).scrollIntoView();
  });
  render();
  view.appendChild(table);
  view.appendChild(more);
}
