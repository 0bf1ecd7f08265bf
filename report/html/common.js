// The helpers every sqscope page shares (report --html, diff --html),
// read into one closure with the page's own script after them: the data
// in #sqscope-data, elements and SVG, figures that may be absent, cards
// that open and close, the list that opens one, the QP table's sorting
// and filtering. No library, nothing fetched: a page works from a file,
// offline.
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

// wireQPs lists every QP in #pick, opens the cards of data.plot, and
// sorts (a heading clicked: by it, again: the other way) and filters
// (#filter, text in any cell) the rows of #qptable; picking a QP or
// clicking its row opens its card (open(i) returns it).
function wireQPs(labels, open) {
  var pick = document.getElementById("pick");
  labels.forEach(function (l, i) { pick.appendChild(el("option", { value: String(i) }, l)); });
  pick.addEventListener("change", function () {
    if (pick.value !== "") open(Number(pick.value)).scrollIntoView();
  });
  data.plot.forEach(open);

  var table = document.getElementById("qptable"), body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows), dir = {};
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.addEventListener("click", function () {
      dir[col] = -(dir[col] || -1);
      var d = dir[col];
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col];
        if (x.hasAttribute("data-v")) return d * (Number(x.getAttribute("data-v")) - Number(y.getAttribute("data-v")));
        return d * x.textContent.localeCompare(y.textContent);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  var filter = document.getElementById("filter"), shown = document.getElementById("shown");
  function applyFilter() {
    var f = filter.value.toLowerCase(), n = 0;
    rows.forEach(function (r) {
      var hit = f === "" || r.textContent.toLowerCase().indexOf(f) >= 0;
      r.style.display = hit ? "" : "none";
      if (hit) n++;
    });
    shown.textContent = n + " of " + rows.length + " QPs";
  }
  filter.addEventListener("input", applyFilter);
  applyFilter();
  body.addEventListener("click", function (e) {
    var r = e.target.closest("tr");
    if (r) open(Number(r.getAttribute("data-qp"))).scrollIntoView();
  });
}
