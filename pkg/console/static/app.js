// sqsworker console: refreshes the overview, draws its charts, follows a redrive and guards the
// purge form. Every value from the server is written with textContent or as an SVG attribute
// holding a number: job data is never parsed as HTML.
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  // The series charted, by what one count is: every job or attempt is in one of them, once (the
  // "failed" series of the JSON is the sum of the last two, and not charted: it would count a
  // job twice).
  var SERIES = {
    job: [["succeeded", "succeeded"], ["retried", "failed, retrying"], ["dead_lettered", "dead-lettered"]],
    attempt: [["succeeded", "succeeded"], ["retried", "failed, retried"], ["dead_lettered", "failed, dead-lettered"]]
  };

  function counted(n, unit) {
    var v = fmt(n);
    return String(v) + " " + unit + (v === 1 ? "" : "s");
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function svgEl(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    return e;
  }

  function sum(values) {
    var s = 0;
    values.forEach(function (v) { s += v; });
    return s;
  }

  function fmt(n) {
    return Math.round(n * 100) / 100;
  }

  // chart draws one series as bars: one per bucket, scaled to the series' largest value.
  function chart(name, label, values, start, step, unit) {
    var wrap = el("figure", "chart " + name);
    var w = 160, h = 40, n = values.length || 1, bw = w / n;
    var top = Math.max.apply(null, values.concat([0]));
    var svg = svgEl("svg", { viewBox: "0 0 " + w + " " + h, width: w, height: h, role: "img" });
    var title = svgEl("title", {});
    title.textContent = label + ": " + counted(sum(values), unit);
    svg.appendChild(title);
    svg.appendChild(svgEl("line", { x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5, "class": "axis" }));
    values.forEach(function (v, i) {
      if (v <= 0 || top <= 0) { return; }
      var bh = Math.max(1, (v / top) * (h - 2));
      var r = svgEl("rect", { x: i * bw + 0.5, y: h - bh, width: Math.max(1, bw - 1), height: bh, "class": "bar" });
      var t = svgEl("title", {});
      t.textContent = new Date(start + i * step * 1000).toISOString().slice(0, 16).replace("T", " ") + "Z: " + counted(v, unit);
      r.appendChild(t);
      svg.appendChild(r);
    });
    wrap.appendChild(svg);
    var cap = el("figcaption", "", label + ": ");
    cap.appendChild(el("b", "total", counted(sum(values), unit)));
    wrap.appendChild(cap);
    return wrap;
  }

  function drawRates(doc) {
    var box = document.getElementById("rates");
    if (!box) { return; }
    var start = Date.parse(doc.start);
    var unit = doc.rates_unit === "attempt" ? "attempt" : "job";
    var frag = document.createDocumentFragment();
    (doc.kinds || []).forEach(function (k) {
      var row = el("div", "kind");
      row.appendChild(el("h3", "", k.kind));
      var charts = el("div", "charts");
      SERIES[unit].forEach(function (s) { charts.appendChild(chart(s[0], s[1], k[s[0]] || [], start, doc.step_seconds, unit)); });
      row.appendChild(charts);
      frag.appendChild(row);
    });
    while (box.firstChild) { box.removeChild(box.firstChild); }
    box.appendChild(frag);
    var empty = document.getElementById("rates-empty");
    if (empty) { empty.hidden = (doc.kinds || []).length > 0 || !!doc.rates_error || !!doc.unreachable; }
    var err = document.getElementById("rates-error");
    if (err) { err.textContent = doc.rates_error || ""; err.hidden = !doc.rates_error; }
    var src = document.getElementById("rates-source");
    if (src) { src.textContent = doc.rates_source || ""; }
    var meta = document.getElementById("rates-meta");
    if (meta) { meta.hidden = !!doc.unreachable || !doc.rates_source; }
  }

  function drawQueues(doc) {
    (doc.queues || []).forEach(function (q, i) {
      var row = document.querySelector('#queues tr[data-q="' + i + '"]');
      if (!row) { return; }
      ["visible", "in_flight", "delayed"].forEach(function (f) {
        var cell = row.querySelector("." + f);
        if (cell) { cell.textContent = q[f] === null || q[f] === undefined ? "-" : String(q[f]); }
      });
      var age = row.querySelector(".oldest_age");
      if (age) { age.textContent = q.oldest_age; }
      var prob = row.querySelector(".problem");
      if (prob) { prob.textContent = q.error || ""; }
    });
    var gen = document.getElementById("generated");
    if (gen) { gen.textContent = "just now"; gen.setAttribute("datetime", doc.generated_at); gen.title = doc.generated_at; }
    var down = document.getElementById("unreachable");
    if (down) { down.textContent = doc.unreachable || ""; down.hidden = !doc.unreachable; }
  }

  function overview() {
    var cfg = document.getElementById("refresh");
    if (!cfg) { return; }
    var api = cfg.getAttribute("data-api");
    var ms = parseInt(cfg.getAttribute("data-ms"), 10) || 5000;
    function tick() {
      fetch(api, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
        .then(function (doc) { drawQueues(doc); drawRates(doc); document.body.setAttribute("data-refreshed", doc.generated_at); })
        .catch(function (e) {
          var err = document.getElementById("rates-error");
          if (err) { err.textContent = "refresh failed: " + e.message; err.hidden = false; }
        })
        .finally(function () { window.setTimeout(tick, ms); });
    }
    tick();
  }

  function redrive() {
    var box = document.getElementById("redrive-progress");
    if (!box) { return; }
    var api = box.getAttribute("data-api");
    function set(id, text) { var e = document.getElementById(id); if (e) { e.textContent = text; } }
    function show(id, on) { var e = document.getElementById(id); if (e) { e.hidden = !on; } }
    function poll() {
      fetch(api, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
        .then(function (st) {
          var bar = document.getElementById("redrive-bar");
          bar.max = Math.max(1, st.total || 0);
          bar.value = st.moved || 0;
          bar.textContent = String(st.moved || 0);
          set("redrive-moved", String(st.moved || 0));
          set("redrive-total", String(st.total || 0));
          set("redrive-method", st.method || "");
          set("redrive-status", st.running ? "running" : (st.error ? "stopped" : "done"));
          set("redrive-left-n", String(st.left_behind || 0));
          show("redrive-left", (st.left_behind || 0) > 0);
          set("redrive-error", st.error || "");
          show("redrive-error", !!st.error);
          set("redrive-task-handle", st.task_handle || "");
          show("redrive-task", !!st.task_handle);
          document.body.setAttribute("data-redrive", st.running ? "running" : "finished");
          if (st.running) { window.setTimeout(poll, 400); }
        })
        .catch(function (e) {
          set("redrive-error", "progress unavailable: " + e.message);
          show("redrive-error", true);
          window.setTimeout(poll, 2000);
        });
    }
    poll();
  }

  // The purge button stays disabled until the queue's name is typed (the server checks it too).
  function purgeGuard() {
    var input = document.getElementById("purge-confirm");
    var button = document.getElementById("purge");
    if (!input || !button) { return; }
    var name = input.getAttribute("data-name");
    function sync() { button.disabled = input.value !== name; }
    input.addEventListener("input", sync);
    sync();
  }

  document.addEventListener("DOMContentLoaded", function () {
    overview();
    redrive();
    purgeGuard();
  });
})();
