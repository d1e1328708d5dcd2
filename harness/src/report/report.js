// Draws the lanes that kubechaos computed (see html.rs) on one time axis, and shows an item's
// details on hover (a tooltip) and on click (the panel below, and the page's address:
// #item=ID selects an item when the page opens). No network, no libraries.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("kubechaos-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var LABEL_W = 300, ROW_H = 22, GROUP_H = 26, AXIS_H = 28, BAR_H = 14, RIGHT_PAD = 16;
  var items = {};
  var selected = null;

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function html(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  // `2m20.0s`, `12.4s`, as kubechaos prints times.
  function fmt(ms) {
    if (ms >= 60000) {
      var s = (ms % 60000) / 1000;
      return Math.floor(ms / 60000) + "m" + (s < 10 ? "0" : "") + s.toFixed(1) + "s";
    }
    return (ms / 1000).toFixed(1) + "s";
  }

  function head() {
    var h = document.getElementById("head");
    h.textContent = "";
    var h1 = html("h1", data.scenario);
    var v = data.verdicts;
    var badge = !v ? html("span", "no verdicts recorded", "verdict none")
      : v[1] > 0 ? html("span", v[1] + " violated", "verdict fail")
        : html("span", "every invariant held", "verdict pass");
    h1.appendChild(badge);
    h.appendChild(h1);
    var meta = "backend " + data.backend + (data.backend === "sim" ? ", seed " + data.seed : "") +
      ", kubechaos " + data.version + ", planned " + fmt(data.duration_ms) +
      (v ? ", " + v[0] + " held, " + v[1] + " violated" : "");
    h.appendChild(html("div", meta, "meta"));

    var box = document.getElementById("violations");
    box.textContent = "";
    if (data.violations.length) {
      var d = html("div", undefined, "box");
      d.appendChild(html("b", data.violations.length === 1 ? "Violated" : data.violations.length + " violated"));
      data.violations.forEach(function (t) { d.appendChild(html("p", t)); });
      box.appendChild(d);
    } else if (v) {
      var ok = html("div", undefined, "box ok");
      ok.appendChild(html("b", "Every invariant held"));
      box.appendChild(ok);
    }
  }

  function legend() {
    var l = document.getElementById("legend");
    l.textContent = "";
    [["var(--fault)", "fault in place"], ["var(--c0)", "lease holder (colour per process)"],
      ["repeating-linear-gradient(45deg,#c8372d 0 2px,#fff 2px 5px)", "expired, no valid holder"],
      ["#4c9a6a", "process up"], ["var(--down)", "process down"], ["var(--pending)", "probe pending"],
      ["#8fc9a3", "Ready / bound / available"], ["var(--pass)", "invariant window, held"],
      ["var(--fail)", "violated / not Ready"]].forEach(function (p) {
      var s = html("span");
      var sw = html("span", undefined, "sw");
      sw.style.background = p[0];
      s.appendChild(sw);
      s.appendChild(document.createTextNode(p[1]));
      l.appendChild(s);
    });
    l.appendChild(html("span", "ticks: renewals (white), expiries and exits (red), starts (black); click an item for its details"));
  }

  // A round step for about `n` ticks over `end` ms.
  function tickStep(end, n) {
    var steps = [1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000, 1800000, 3600000];
    for (var i = 0; i < steps.length; i++) if (end / steps[i] <= n) return steps[i];
    return steps[steps.length - 1];
  }

  function colourOf(span) {
    return span.colour === undefined ? null : "var(--c" + (span.colour % 10) + ")";
  }

  function draw() {
    var chart = document.getElementById("chart");
    chart.textContent = "";
    items = {};
    var width = Math.max(900, chart.clientWidth || 1200);
    var plotW = width - LABEL_W - RIGHT_PAD;
    var end = Math.max(1, data.end_ms);
    var x = function (t) { return LABEL_W + (Math.min(Math.max(t, 0), end) / end) * plotW; };
    var lanes = 0;
    data.groups.forEach(function (g) { lanes += g.lanes.length; });
    var height = AXIS_H + data.groups.length * GROUP_H + lanes * ROW_H + 8;
    var svg = el("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img",
      "aria-label": "timeline of " + data.scenario }, chart);
    var defs = el("defs", {}, svg);
    var hatch = el("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
      patternTransform: "rotate(45)" }, defs);
    el("rect", { width: 6, height: 6, fill: "#fff" }, hatch);
    el("rect", { width: 2.5, height: 6, fill: "#c8372d" }, hatch);

    // Axis and grid.
    var axis = el("g", { "class": "axis" }, svg);
    var step = tickStep(end, Math.max(4, Math.floor(plotW / 90)));
    for (var t = 0; t <= end; t += step) {
      el("line", { "class": "grid", x1: x(t), x2: x(t), y1: AXIS_H - 6, y2: height }, axis);
      var label = el("text", { x: x(t), y: AXIS_H - 10, "text-anchor": "middle" }, axis);
      label.textContent = fmt(t).replace(/\.0s$/, "s");
    }

    // Faults in place, shaded behind every lane.
    var bands = el("g", { "class": "bands" }, svg);
    data.groups.forEach(function (g) {
      if (g.name !== "faults") return;
      g.lanes.forEach(function (lane) {
        lane.spans.forEach(function (s) {
          el("rect", { "class": "band", x: x(s.from), width: Math.max(1, x(s.to) - x(s.from)), y: AXIS_H, height: height - AXIS_H }, bands);
        });
      });
    });

    var y = AXIS_H;
    data.groups.forEach(function (g) {
      var title = el("text", { "class": "group-title", x: 4, y: y + GROUP_H - 8 }, svg);
      title.textContent = g.name;
      y += GROUP_H;
      g.lanes.forEach(function (lane) {
        drawLane(svg, lane, y, x);
        y += ROW_H;
      });
    });
    document.documentElement.setAttribute("data-rendered", String(lanes));
  }

  function drawLane(svg, lane, y, x) {
    var g = el("g", { "class": "lane", "data-lane": lane.id }, svg);
    el("rect", { "class": "lane-bg", x: LABEL_W, y: y + 2, width: x(data.end_ms) - LABEL_W, height: ROW_H - 4 }, g);
    var label = el("text", { "class": "lane-label", x: 12, y: y + ROW_H / 2 + 4 }, g);
    label.textContent = lane.label.length > 42 ? lane.label.slice(0, 41) + "…" : lane.label;
    el("title", {}, label).textContent = lane.label;
    var top = y + (ROW_H - BAR_H) / 2;
    var texts = [];
    lane.spans.forEach(function (s, i) {
      var id = lane.id + "@s" + i;
      var w = Math.max(1.5, x(s.to) - x(s.from));
      var thin = s.class === "leading";
      var r = el("rect", { "class": "item span " + s.class, "data-item": id, x: x(s.from), y: thin ? top + BAR_H - 4 : top,
        width: w, height: thin ? 4 : BAR_H, rx: 2 }, g);
      var c = colourOf(s);
      if (c && (s.class === "holder" || s.class === "leading")) r.style.fill = c;
      items[id] = { lane: lane, what: s.class, from: s.from, to: s.to, detail: s.detail, node: r };
      if (s.text && w > s.text.length * 6.5 + 8) texts.push([x(s.from) + 4, s.text]);
    });
    lane.marks.forEach(function (m, i) {
      var id = lane.id + "@m" + i;
      var mx = x(m.at);
      // Renewals are short ticks at the bar's foot, under its text; the rest cross the lane.
      var short = m.class === "renew";
      var line = el("line", { "class": "mark " + m.class, x1: mx, x2: mx, y1: short ? top + BAR_H - 4 : y + 1,
        y2: short ? top + BAR_H : y + ROW_H - 1 }, g);
      // Where a mark can be hovered: a renewal only at the foot, so that its bar can be too.
      var hit = el("rect", { "class": "item hit", "data-item": id, x: mx - 3, y: short ? top + BAR_H - 4 : y + 1, width: 6,
        height: short ? ROW_H - (top - y) - BAR_H + 3 : ROW_H - 2 }, g);
      items[id] = { lane: lane, what: m.class, at: m.at, detail: m.detail, node: line, hit: hit };
    });
    texts.forEach(function (p) {
      el("text", { "class": "in-bar", x: p[0], y: top + BAR_H - 4 }, g).textContent = p[1];
    });
  }

  function describe(it) {
    var when = it.at !== undefined ? "at " + fmt(it.at) : fmt(it.from) + " – " + fmt(it.to);
    return { what: it.lane.label + " · " + it.what + " · " + when, text: it.detail };
  }

  function select(id, fromClick) {
    if (selected && items[selected]) items[selected].node.classList.remove("selected");
    var box = document.getElementById("details");
    box.textContent = "";
    selected = items[id] ? id : null;
    if (!selected) {
      box.appendChild(html("div", "Hover over an item for its details; click to keep them here.", "hint"));
      return;
    }
    var it = items[id];
    it.node.classList.add("selected");
    var d = describe(it);
    box.setAttribute("data-item", id);
    box.appendChild(html("div", d.what, "what"));
    box.appendChild(html("div", d.text, "text"));
    if (fromClick && window.history && window.history.replaceState) {
      window.history.replaceState(null, "", "#item=" + encodeURIComponent(id));
    }
  }

  function fromHash() {
    var m = /(?:^#|&)item=([^&]*)/.exec(window.location.hash);
    return m ? decodeURIComponent(m[1]) : null;
  }

  function wire() {
    var chart = document.getElementById("chart");
    var tip = document.getElementById("tip");
    chart.addEventListener("mousemove", function (e) {
      var id = e.target.getAttribute && e.target.getAttribute("data-item");
      if (!id || !items[id]) { tip.style.display = "none"; return; }
      var d = describe(items[id]);
      tip.textContent = d.what + "\n" + d.text;
      tip.style.whiteSpace = "pre-wrap";
      tip.style.display = "block";
      var left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
      tip.style.left = Math.max(4, left) + "px";
      tip.style.top = (e.clientY + 16) + "px";
    });
    chart.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    chart.addEventListener("click", function (e) {
      var id = e.target.getAttribute && e.target.getAttribute("data-item");
      select(id, true);
    });
    document.addEventListener("keydown", function (e) { if (e.key === "Escape") select(null, true); });
    var pending = null;
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(function () { draw(); select(selected, false); }, 100);
    });
    window.addEventListener("hashchange", function () { select(fromHash(), false); });
  }

  head();
  legend();
  draw();
  wire();
  select(fromHash(), false);
})();
