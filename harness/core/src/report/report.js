// Draws the lanes that kubechaos computed (see html.rs) on one time axis, and shows an item's
// details on hover (a tooltip) and on click (the panel below). Dragging across the chart zooms
// into that time; a double click, Escape or the toolbar's button shows the whole run again.
// The page's address keeps both (#item=ID&zoom=FROM-TO, in ms) so that a view can be shared.
// No network, no libraries.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("kubechaos-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var LABEL_W = 300, ROW_H = 22, GROUP_H = 26, AXIS_H = 28, BAR_H = 14, RIGHT_PAD = 16;
  var items = {};
  var selected = null;
  var zoom = null; // {from, to} in ms, or the whole run
  var scale = null; // how the last drawing maps time to x: {from, to, plotW}

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
    var stopped = data.interrupted_ms !== null && data.interrupted_ms !== undefined;
    // Violated, and what the evidence could not tell (never counted as violated).
    var notHeld = v ? [v[1] ? v[1] + " violated" : "", v[2] ? v[2] + " cannot tell" : ""]
      .filter(function (t) { return t; }).join(", ") : "";
    var badge = stopped ? html("span", "interrupted", "verdict none")
      : !v ? html("span", "no verdicts recorded", "verdict none")
      : v[1] > 0 ? html("span", notHeld, "verdict fail")
        : v[2] > 0 ? html("span", notHeld, "verdict none")
          : html("span", "every invariant held", "verdict pass");
    h1.appendChild(badge);
    h.appendChild(h1);
    var meta = "backend " + data.backend + (data.backend === "sim" ? ", seed " + data.seed : "") +
      ", kubechaos " + data.version + ", planned " + fmt(data.duration_ms) +
      (v ? ", " + v[0] + " held, " + v[1] + " violated" + (v[2] ? ", " + v[2] + " cannot tell" : "") : "");
    h.appendChild(html("div", meta, "meta"));

    var box = document.getElementById("violations");
    box.textContent = "";
    if (stopped) {
      var s = html("div", undefined, "box stopped");
      s.appendChild(html("b", "Interrupted at " + fmt(data.interrupted_ms) + " (Ctrl-C or SIGTERM)"));
      s.appendChild(html("p", "The timeline ends there and was not judged: no invariant has a verdict."));
      box.appendChild(s);
    } else if (data.violations.length) {
      var d = html("div", undefined, v && v[1] === 0 ? "box unknown" : "box");
      d.appendChild(html("b", v && v[1] + v[2] === 1 ? (v[1] ? "Violated" : "Cannot tell") : notHeld));
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
      ["var(--fail)", "violated / not Ready"], ["var(--muted)", "cannot tell (no evidence)"]].forEach(function (p) {
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
    var steps = [100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000, 1800000, 3600000];
    for (var i = 0; i < steps.length; i++) if (end / steps[i] <= n) return steps[i];
    return steps[steps.length - 1];
  }

  // An axis label: `45s`, `2m`, `2m30s`, `1m12.5s`.
  function fmtTick(ms) {
    var m = Math.floor(ms / 60000), s = (ms % 60000) / 1000;
    var ss = s % 1 === 0 ? String(s) : s.toFixed(1);
    if (m === 0) return ss + "s";
    return s === 0 ? m + "m" : m + "m" + ss + "s";
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
    var from = zoom ? zoom.from : 0, to = zoom ? zoom.to : end;
    scale = { from: from, to: to, plotW: plotW };
    var x = function (t) { return LABEL_W + ((Math.min(Math.max(t, from), to) - from) / (to - from)) * plotW; };
    chart.setAttribute("data-zoom", from + "-" + to);
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
    var step = tickStep(to - from, Math.max(4, Math.floor(plotW / 90)));
    for (var t = Math.ceil(from / step) * step; t <= to; t += step) {
      el("line", { "class": "grid", x1: x(t), x2: x(t), y1: AXIS_H - 6, y2: height }, axis);
      var nearEnd = x(t) > width - RIGHT_PAD - 24;
      var label = el("text", { x: x(t), y: AXIS_H - 10, "text-anchor": nearEnd ? "end" : "middle" }, axis);
      label.textContent = fmtTick(t);
    }
    toolbar();

    // Faults in place, shaded behind every lane.
    var bands = el("g", { "class": "bands" }, svg);
    data.groups.forEach(function (g) {
      if (g.name !== "faults") return;
      g.lanes.forEach(function (lane) {
        lane.spans.forEach(function (s) {
          if (s.to < from || s.from > to) return;
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
    // Too long for the column: its start and its end, which tell lanes apart (the end of a
    // Lease's name, the window an invariant opens at), with the middle cut out.
    label.textContent = lane.label.length > 42
      ? lane.label.slice(0, 20) + "…" + lane.label.slice(lane.label.length - 21)
      : lane.label;
    el("title", {}, label).textContent = lane.label;
    var top = y + (ROW_H - BAR_H) / 2;
    var texts = [];
    lane.spans.forEach(function (s, i) {
      if (s.to < scale.from || s.from > scale.to) return;
      var id = lane.id + "@s" + i;
      var w = Math.max(1.5, x(s.to) - x(s.from));
      var thin = s.class === "leading";
      var r = el("rect", { "class": "item span " + s.class, "data-item": id, x: x(s.from), y: thin ? top + BAR_H - 4 : top,
        width: w, height: thin ? 4 : BAR_H, rx: 2 }, g);
      var c = colourOf(s);
      if (c && (s.class === "holder" || s.class === "leading")) r.style.fill = c;
      items[id] = { lane: lane, what: s.class, from: s.from, to: s.to, detail: s.detail, node: r };
      if (s.text && w > s.text.length * 6.5 + 8) texts.push([x(Math.max(s.from, scale.from)) + 4, s.text]);
    });
    lane.marks.forEach(function (m, i) {
      if (m.at < scale.from || m.at > scale.to) return;
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

  function select(id, share) {
    if (selected && items[selected]) items[selected].node.classList.remove("selected");
    var box = document.getElementById("details");
    box.textContent = "";
    box.removeAttribute("data-item");
    selected = id && items[id] ? id : null;
    if (!selected) {
      box.appendChild(html("div", "Hover over an item for its details; click to keep them here.", "hint"));
    } else {
      var it = items[id];
      it.node.classList.add("selected");
      var d = describe(it);
      box.setAttribute("data-item", id);
      box.appendChild(html("div", d.what, "what"));
      box.appendChild(html("div", d.text, "text"));
    }
    if (share) writeHash();
  }

  function setZoom(from, to) {
    var end = Math.max(1, data.end_ms);
    from = Math.max(0, Math.round(from));
    to = Math.min(end, Math.round(to));
    zoom = to - from >= 100 && (from > 0 || to < end) ? { from: from, to: to } : null;
    var keep = selected;
    draw();
    select(keep, true);
  }

  function toolbar() {
    var bar = document.getElementById("toolbar");
    bar.textContent = "";
    if (!zoom) {
      bar.appendChild(html("span", "Drag across the chart to zoom in.", "hint"));
      return;
    }
    bar.appendChild(html("span", "Showing " + fmt(zoom.from) + " – " + fmt(zoom.to) + " of " + fmt(data.end_ms) + " "));
    var b = html("button", "Whole run");
    b.type = "button";
    b.addEventListener("click", function () { setZoom(0, data.end_ms); });
    bar.appendChild(b);
  }

  function writeHash() {
    var parts = [];
    if (selected) parts.push("item=" + encodeURIComponent(selected));
    if (zoom) parts.push("zoom=" + zoom.from + "-" + zoom.to);
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", parts.length ? "#" + parts.join("&") : window.location.pathname);
    }
  }

  function fromHash() {
    var h = window.location.hash;
    var item = /(?:^#|&)item=([^&]*)/.exec(h);
    var z = /(?:^#|&)zoom=(\d+)-(\d+)/.exec(h);
    return { item: item ? decodeURIComponent(item[1]) : null, zoom: z ? [Number(z[1]), Number(z[2])] : null };
  }

  // The time at a horizontal position in the chart.
  function timeAt(px) {
    var f = Math.min(Math.max((px - LABEL_W) / scale.plotW, 0), 1);
    return scale.from + f * (scale.to - scale.from);
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
    // Drag to zoom: a band follows the mouse; a drag of a few pixels or more zooms on release.
    var drag = null, dragged = false;
    var px = function (e) { return e.clientX - chart.querySelector("svg").getBoundingClientRect().left; };
    chart.addEventListener("mousedown", function (e) {
      if (e.button !== 0 || px(e) < LABEL_W) return;
      drag = { x0: px(e), band: null };
      e.preventDefault();
    });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var svg = chart.querySelector("svg");
      var a = Math.max(LABEL_W, Math.min(drag.x0, px(e))), b = Math.max(drag.x0, px(e));
      if (!drag.band) drag.band = el("rect", { "class": "brush", y: 0, height: svg.getAttribute("height") }, svg);
      drag.band.setAttribute("x", a);
      drag.band.setAttribute("width", Math.max(0, b - a));
    });
    window.addEventListener("mouseup", function (e) {
      if (!drag) return;
      var d = drag;
      drag = null;
      if (d.band) d.band.remove();
      if (Math.abs(px(e) - d.x0) > 4) {
        dragged = true;
        var t0 = timeAt(Math.min(d.x0, px(e))), t1 = timeAt(Math.max(d.x0, px(e)));
        setZoom(t0, t1);
      }
    });
    chart.addEventListener("click", function (e) {
      if (dragged) { dragged = false; return; }
      var id = e.target.getAttribute && e.target.getAttribute("data-item");
      select(id, true);
    });
    chart.addEventListener("dblclick", function () { setZoom(0, data.end_ms); });
    document.addEventListener("keydown", function (e) {
      if (e.key !== "Escape") return;
      if (zoom) setZoom(0, data.end_ms); else select(null, true);
    });
    var pending = null;
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(function () { draw(); select(selected, false); }, 100);
    });
    window.addEventListener("hashchange", open);
  }

  // Show what the address names: a zoom, an item.
  function open() {
    var h = fromHash();
    zoom = null;
    if (h.zoom) {
      var end = Math.max(1, data.end_ms);
      var from = Math.max(0, Math.min(h.zoom[0], end)), to = Math.min(end, h.zoom[1]);
      if (to - from >= 100) zoom = { from: from, to: to };
    }
    draw();
    select(h.item, false);
  }

  head();
  legend();
  wire();
  open();
})();
