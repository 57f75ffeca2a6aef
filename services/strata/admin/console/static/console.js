// Strata console: progressive enhancement only; every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // Forms and buttons with data-confirm ask before they submit.
  document.querySelectorAll("form").forEach((form) => {
    form.addEventListener("submit", (event) => {
      const button = event.submitter;
      const question = (button && button.dataset.confirm) || form.dataset.confirm;
      if (question && !window.confirm(question)) {
        event.preventDefault();
      }
    });
  });
  // A search box with data-filter-table hides the rows whose name does not match as you type.
  document.querySelectorAll("input[data-filter-table]").forEach((input) => {
    const table = document.getElementById(input.dataset.filterTable);
    if (!table) return;
    input.addEventListener("input", () => {
      const needle = input.value.trim();
      table.querySelectorAll("tbody tr[data-name]").forEach((row) => {
        row.hidden = needle !== "" && !row.dataset.name.includes(needle);
      });
    });
  });
});

// Charts: each <figure class="chart" data-series='["key", ...]'> is drawn as an inline SVG
// line chart from GET {prefix}/series, polled every sampling interval while the page is shown
// (stopped when the page is hidden or left). No library, no CDN.
(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = ["#2456c7", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b"];
  const W = 560, H = 150, PAD_L = 62, PAD_B = 22, PAD_T = 8, PAD_R = 8;

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function human(value, unit) {
    const bytes = unit.startsWith("B");
    const base = bytes ? 1024 : 1000;
    const names = bytes ? ["", "Ki", "Mi", "Gi", "Ti"] : ["", "k", "M", "G", "T"];
    let v = value, i = 0;
    while (Math.abs(v) >= base && i < names.length - 1) { v /= base; i += 1; }
    const digits = v >= 100 || Number.isInteger(v) ? 0 : 1;
    return `${v.toFixed(digits)} ${names[i]}${unit}`.trim();
  }

  function draw(figure, series) {
    const keys = JSON.parse(figure.dataset.series);
    const unit = figure.dataset.unit || "";
    const labels = figure.dataset.labels ? JSON.parse(figure.dataset.labels) : keys;
    const lines = keys.map((k) => series[k] || []);
    const all = lines.flat();
    figure.replaceChildren();
    const caption = document.createElement("figcaption");
    caption.textContent = figure.dataset.title || keys.join(", ");
    figure.append(caption);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart-svg" });
    figure.append(svg);
    if (all.length === 0) {
      svg.append(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "muted" },
        "collecting samples…"));
      figure.dataset.points = "0";
      return;
    }
    const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
    const top = Math.max(...all.map((p) => p[1]), 1e-9) * 1.1;
    const x = (t) => PAD_L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - PAD_L - PAD_R);
    const y = (v) => H - PAD_B - (v / top) * (H - PAD_B - PAD_T);
    svg.append(el("line", { x1: PAD_L, y1: H - PAD_B, x2: W - PAD_R, y2: H - PAD_B, class: "axis" }));
    svg.append(el("line", { x1: PAD_L, y1: PAD_T, x2: PAD_L, y2: H - PAD_B, class: "axis" }));
    svg.append(el("text", { x: PAD_L - 4, y: PAD_T + 10, "text-anchor": "end", class: "tick" }, human(top, unit)));
    svg.append(el("text", { x: PAD_L - 4, y: H - PAD_B, "text-anchor": "end", class: "tick" }, human(0, unit)));
    const clock = (t) => new Date(t * 1000).toLocaleTimeString();
    svg.append(el("text", { x: PAD_L, y: H - 6, class: "tick" }, clock(t0)));
    svg.append(el("text", { x: W - PAD_R, y: H - 6, "text-anchor": "end", class: "tick" }, clock(t1)));
    const legend = document.createElement("div");
    legend.className = "legend";
    lines.forEach((points, i) => {
      const color = COLORS[i % COLORS.length];
      if (points.length > 0) {
        const path = points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
        svg.append(el("polyline", { points: path, fill: "none", stroke: color, "stroke-width": 1.6 }));
      }
      const last = points.length ? human(points[points.length - 1][1], unit) : "–";
      const item = document.createElement("span");
      item.style.color = color;
      item.dataset.key = keys[i];
      item.dataset.last = points.length ? String(points[points.length - 1][1]) : "";
      item.textContent = `${labels[i]}: ${last}`;
      legend.append(item);
    });
    figure.append(legend);
    figure.dataset.points = String(all.length);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const figures = [...document.querySelectorAll("figure.chart[data-series]")];
    if (figures.length === 0) return;
    const prefix = document.body.dataset.prefix || "/console";
    const keys = [...new Set(figures.flatMap((f) => JSON.parse(f.dataset.series)))];
    const query = keys.map((k) => `key=${encodeURIComponent(k)}`).join("&");
    let timer = null, stopped = false;
    async function poll() {
      timer = null;
      let delay = 5000;
      try {
        const answer = await fetch(`${prefix}/series?${query}`, { credentials: "same-origin",
                                                                  cache: "no-store" });
        if (answer.ok) {
          const body = await answer.json();
          figures.forEach((f) => draw(f, body.series));
          delay = Math.max(500, body.interval_s * 1000);
        }
      } catch (err) { /* the next poll tries again */ }
      if (!stopped && !document.hidden) timer = setTimeout(poll, delay);
    }
    document.addEventListener("visibilitychange", () => {
      if (document.hidden && timer) { clearTimeout(timer); timer = null; }
      else if (!document.hidden && !timer && !stopped) poll();
    });
    window.addEventListener("pagehide", () => { stopped = true; if (timer) clearTimeout(timer); });
    poll();
  });
})();

// Live tail of the record browser: while on, GET the table's data-tail-url from data-next
// every second and append the records (as text nodes: a record is never markup), keeping the
// last MAX_ROWS; stopped by the button, or when the page is hidden or left.
(() => {
  const MAX_ROWS = 500, PERIOD_MS = 1000;
  function cell(text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    if (text === null) {
      const i = document.createElement("i");
      i.textContent = "null";
      td.append(i);
    } else {
      const pre = document.createElement("pre");
      pre.textContent = text;
      td.append(pre);
    }
    return td;
  }
  function row(record) {
    const tr = document.createElement("tr");
    tr.dataset.offset = String(record.offset);
    tr.className = "tailed";
    const offset = document.createElement("td");
    offset.className = "num";
    offset.textContent = String(record.offset);
    const time = document.createElement("td");
    time.textContent = record.timestamp;
    time.title = record.timestamp_type;
    const headers = document.createElement("td");
    headers.className = "data";
    for (const [name, value] of record.headers) {
      const div = document.createElement("div");
      const b = document.createElement("b");
      b.textContent = name;
      div.append(b, document.createTextNode("="));
      if (value === null) {
        const i = document.createElement("i");
        i.textContent = "null";
        div.append(i);
      } else {
        div.append(document.createTextNode(value));
      }
      headers.append(div);
    }
    tr.append(offset, time, cell(record.key, "data"), cell(record.value, "data"), headers);
    return tr;
  }
  document.addEventListener("DOMContentLoaded", () => {
    const table = document.getElementById("records");
    const button = document.getElementById("tail-button");
    const status = document.getElementById("tail-status");
    if (!table || !button || !table.dataset.tailUrl) return;
    const body = table.tBodies[0];
    let on = false, timer = null, next = Number(table.dataset.next);
    function stop(text) {
      on = false;
      if (timer) clearTimeout(timer);
      timer = null;
      button.textContent = "Live tail";
      status.textContent = text || "off";
    }
    async function poll() {
      timer = null;
      try {
        const answer = await fetch(`${table.dataset.tailUrl}&offset=${next}`,
                                   { credentials: "same-origin", cache: "no-store" });
        if (!answer.ok) { stop(`stopped: HTTP ${answer.status}`); return; }
        const data = await answer.json();
        if (!on) return;
        if (data.records.length) body.querySelectorAll("tr.empty").forEach((r) => r.remove());
        data.records.forEach((r) => body.append(row(r)));
        while (body.rows.length > MAX_ROWS) body.rows[0].remove();
        next = data.next;
        table.dataset.next = String(next);
        status.textContent = `tailing: next offset ${next}, high watermark ${data.high_watermark}`;
      } catch (err) {
        status.textContent = "tailing (retrying)";
      }
      if (on && !document.hidden) timer = setTimeout(poll, PERIOD_MS);
    }
    function start() {
      on = true;
      button.textContent = "Stop tail";
      status.textContent = "tailing";
      poll();
    }
    button.addEventListener("click", () => (on ? stop() : start()));
    document.addEventListener("visibilitychange", () => {
      if (document.hidden && timer) { clearTimeout(timer); timer = null; }
      else if (!document.hidden && on && !timer) poll();
    });
    window.addEventListener("pagehide", () => stop());
    if (button.dataset.auto === "1") start();
  });
})();
