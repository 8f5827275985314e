// The HTML report: one file with its data (summary_json), styles and script
// inline, so it opens anywhere without a network. The script draws the
// time split per locality, the timeline (Gantt chart of every worker of
// every locality, communication and training steps; zoom with the wheel,
// pan by dragging), utilization over time, the phases of training steps, the
// top primitives and the execution trees (a click on a node shows its source
// line).
#include <string>

#include "tessera/trace/export.hpp"

namespace tessera::trace {

namespace {

const char* kHead = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tessera trace report</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 24px 40px; color: #222; }
h1 { font-size: 22px; margin: 18px 0 4px; }
h2 { font-size: 17px; margin: 26px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
.meta { color: #555; }
.problem { background: #fff4e5; border-left: 4px solid #e69500; padding: 6px 10px; margin: 6px 0; }
.slowest { background: #eef5ff; border-left: 4px solid #3b78d8; padding: 6px 10px; }
.hint { color: #777; font-size: 12px; margin: 2px 0 6px; }
table { border-collapse: collapse; }
td, th { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.bar { display: flex; height: 18px; width: 520px; border: 1px solid #ccc; }
.bar div { height: 100%; }
.legend span { display: inline-block; margin-right: 14px; }
.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
#gantt-wrap { position: relative; }
#gantt { width: 100%; border: 1px solid #ddd; cursor: grab; }
#tooltip { position: absolute; pointer-events: none; background: #222; color: #fff; padding: 4px 7px;
  font-size: 12px; border-radius: 3px; display: none; white-space: pre; }
#tree-wrap { display: flex; gap: 16px; align-items: flex-start; }
#tree { flex: 1 1 60%; font: 12px/1.5 ui-monospace, monospace; max-height: 640px; overflow: auto;
  border: 1px solid #ddd; padding: 6px; }
#tree ul { list-style: none; margin: 0; padding-left: 16px; }
#tree .node { cursor: pointer; white-space: nowrap; }
#tree .node:hover { background: #eef5ff; }
#tree .node.selected { background: #d6e6ff; }
#tree .t { color: #555; }
#tree .toggle { display: inline-block; width: 14px; color: #888; }
#source { flex: 1 1 40%; font: 12px/1.5 ui-monospace, monospace; border: 1px solid #ddd; padding: 6px;
  min-height: 80px; max-height: 640px; overflow: auto; white-space: pre; margin: 0; }
#source .here { background: #fff1a8; display: block; }
svg text { font-size: 11px; fill: #555; }
</style>
</head>
<body>
<h1>tessera trace report</h1>
<div class="meta" id="meta"></div>
<div id="problems"></div>
<section id="split-section"><h2>Time per locality</h2>
<p class="hint">Thread time of each locality: computing (tasks and primitives), waiting while communication was
in flight, and idle.</p>
<div id="split"></div><div id="slowest"></div></section>
<section id="gantt-section"><h2>Timeline</h2>
<p class="hint">One row per worker of each locality, then its communication and training steps. Wheel: zoom;
drag: pan; double-click: whole run; hover: details. Shading shows how busy a row is where events are too many to
draw one by one.</p>
<div id="gantt-wrap"><canvas id="gantt"></canvas><div id="tooltip"></div></div></section>
<section id="utilization-section"><h2>Utilization over time</h2>
<p class="hint">Fraction of each locality's threads busy.</p><svg id="utilization"></svg></section>
<section id="steps-section"><h2>Training steps</h2><div id="steps"></div></section>
<section id="native-section"><h2>Native code</h2>
<p class="hint">Compiles and cache loads of the fast loops' native code (the first call's cost), and each loop's
runs: one event per run, native or on the loop interpreter.</p><table id="native"></table></section>
<section id="top-section"><h2>Top primitives</h2><table id="top"></table></section>
<section id="tree-section"><h2>Execution tree</h2>
<p class="hint">Inclusive time (the node and everything under it) and exclusive time (its own work), summed over
localities. Click a node to see its source line.</p>
<div id="tree-wrap"><div id="tree"></div><pre id="source">(click a node)</pre></div></section>
<script id="data" type="application/json">)HTML";

const char* kTail = R"HTML(</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const L = D.labels;

function fmt(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (a >= 1e6) return (ns / 1e6).toFixed(2) + " ms";
  if (a >= 1e3) return (ns / 1e3).toFixed(1) + " us";
  return Math.round(ns) + " ns";
}
function bytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + " GiB";
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(2) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
  return n + " B";
}
function pct(a, b) { return b > 0 ? (100 * a / b).toFixed(0) + "%" : "0%"; }
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "style") e.style.cssText = v; else if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of kids) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function hue(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
  return h % 360;
}
const COLORS = { compute: "#3b78d8", wait: "#e69500", idle: "#d0d0d0",
  forward: "#4caf50", backward: "#8e44ad", comm_wait: "#e69500", optimizer: "#00897b", other: "#9e9e9e" };

// Header and problems.
const locs = D.localities;
document.getElementById("meta").textContent = D.dir + ": " + locs.length + " of " + D.expected +
  " localities, " + fmt(D.span_ns) + " recorded";
const problems = document.getElementById("problems");
for (const p of D.problems) problems.append(el("div", { class: "problem" }, p));

// Time split per locality.
(function split() {
  const box = document.getElementById("split");
  box.append(el("div", { class: "legend" },
    el("span", {}, el("span", { class: "swatch", style: "background:" + COLORS.compute }), "compute"),
    el("span", {}, el("span", { class: "swatch", style: "background:" + COLORS.wait }), "waiting for communication"),
    el("span", {}, el("span", { class: "swatch", style: "background:" + COLORS.idle }), "idle")));
  const table = el("table", {}, el("tr", {}, el("th", {}, "locality"), el("th", {}, "threads"), el("th", {}, "wall"),
    el("th", {}, "split"), el("th", {}, "compute"), el("th", {}, "comm. wait"), el("th", {}, "idle"),
    el("th", {}, "communication"), el("th", {}, "tasks")));
  for (const l of locs) {
    const s = l.stats, cap = Math.max(1, s.threads * s.wall_ns);
    const bar = el("div", { class: "bar" },
      el("div", { style: "background:" + COLORS.compute + ";width:" + (100 * s.compute_ns / cap) + "%" }),
      el("div", { style: "background:" + COLORS.wait + ";width:" + (100 * s.comm_wait_ns / cap) + "%" }),
      el("div", { style: "background:" + COLORS.idle + ";width:" + (100 * s.idle_ns / cap) + "%" }));
    table.append(el("tr", { class: "locality-row" }, el("td", {}, "locality " + l.locality + (l.complete ? "" : " (truncated)")),
      el("td", {}, s.threads), el("td", {}, fmt(s.wall_ns)), el("td", {}, bar),
      el("td", {}, fmt(s.compute_ns) + " (" + pct(s.compute_ns, cap) + ")"),
      el("td", {}, fmt(s.comm_wait_ns) + " (" + pct(s.comm_wait_ns, cap) + ")"),
      el("td", {}, fmt(s.idle_ns) + " (" + pct(s.idle_ns, cap) + ")"),
      el("td", {}, s.comm_ops + " ops, " + bytes(s.comm_bytes)), el("td", {}, s.tasks)));
  }
  box.append(table);
  if (locs.length > 1 && D.slowest >= 0) {
    const slow = locs.find(l => l.locality === D.slowest);
    const others = locs.filter(l => l !== slow);
    const meanOther = others.reduce((a, l) => a + l.stats.compute_ns, 0) / others.length;
    const waitOther = others.reduce((a, l) => a + l.stats.comm_wait_ns, 0) / others.length;
    document.getElementById("slowest").append(el("p", { class: "slowest" },
      "Slowest: locality " + slow.locality + " computed " + fmt(slow.stats.compute_ns) + " of thread time, " +
      pct(slow.stats.compute_ns - meanOther, meanOther) + " more than the others on average; they waited " +
      fmt(waitOther) + " for communication (it waited " + fmt(slow.stats.comm_wait_ns) + ")."));
  }
})();

// Timeline.
const rows = [];
for (const l of locs) {
  rows.push({ kind: "head", text: "locality " + l.locality + " (" + l.host + ", pid " + l.pid + ")" });
  for (const t of l.threads) rows.push({ kind: "thread", text: t.name, thread: t, loc: l });
  let lanes = 0;
  for (const c of l.comm) lanes = Math.max(lanes, c[5] + 1);
  for (let k = 0; k < lanes; k++) {
    rows.push({ kind: "comm", text: k ? "communication (" + (k + 1) + ")" : "communication", lane: k, loc: l });
  }
  if (l.steps.length) rows.push({ kind: "steps", text: "training steps", loc: l });
}
const ROW = 18, LABEL = 210;
const canvas = document.getElementById("gantt");
const ctx = canvas.getContext("2d");
let v0 = 0, v1 = Math.max(1, D.span_ns);
function resize() {
  const ratio = window.devicePixelRatio || 1;
  canvas.style.height = (rows.length * ROW + 24) + "px";
  canvas.width = canvas.clientWidth * ratio;
  canvas.height = (rows.length * ROW + 24) * ratio;
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  draw();
}
function xOf(t) { return LABEL + (t - v0) / (v1 - v0) * (canvas.clientWidth - LABEL - 4); }
function tOf(x) { return v0 + (x - LABEL) / (canvas.clientWidth - LABEL - 4) * (v1 - v0); }
const PHASES = ["forward", "backward", "comm_wait", "optimizer", "other"];
function hits(row) {
  // The drawable items of a row: [t0, t1, text, color].
  if (row.items) return row.items;
  const out = [];
  if (row.kind === "thread") {
    for (const e of row.thread.events) {
      const name = L[e[2]];
      out.push([e[0], e[0] + e[1], name + (e[3] >= 0 ? "\n" + L[e[3]] : ""), "hsl(" + hue(name) + ",55%,55%)"]);
    }
  } else if (row.kind === "comm") {
    for (const c of row.loc.comm) {
      if (c[5] !== row.lane) continue;
      out.push([c[0], c[0] + c[1], L[c[2]] + "\n" + bytes(c[4]) + " at " + L[c[3]], "#e69500"]);
    }
  } else if (row.kind === "steps") {
    for (const s of row.loc.steps) {
      if (!s[3]) { out.push([s[1], s[1] + s[2], "step " + s[0], "#777"]); continue; }
      let at = s[1];
      PHASES.forEach((p, i) => {
        const d = s[4 + i];
        if (d > 0) out.push([at, at + d, "step " + s[0] + ": " + p.replace("_", " ") + "\n(step " + fmt(s[2]) + ")", COLORS[p]]);
        at += d;
      });
    }
  }
  row.items = out;
  return out;
}
function draw() {
  const w = canvas.clientWidth;
  ctx.clearRect(0, 0, w, canvas.height);
  ctx.font = "11px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  rows.forEach((row, i) => {
    const y = i * ROW;
    if (row.kind === "head") {
      ctx.fillStyle = "#f3f3f3"; ctx.fillRect(0, y, w, ROW);
      ctx.fillStyle = "#222"; ctx.fillText(row.text, 4, y + ROW / 2);
      return;
    }
    ctx.fillStyle = "#555"; ctx.fillText(row.text, 12, y + ROW / 2);
    if (row.kind === "thread" && row.thread.truncated) {
      const bins = row.thread.bins, n = bins.length, width = D.span_ns / n;
      for (let k = 0; k < n; k++) {
        if (!bins[k]) continue;
        const a = xOf(k * width), b = xOf((k + 1) * width);
        if (b < LABEL || a > w) continue;
        ctx.fillStyle = "rgba(59,120,216," + (0.15 + 0.6 * bins[k]) + ")";
        ctx.fillRect(Math.max(LABEL, a), y + 2, Math.max(1, b - a), ROW - 4);
      }
    }
    for (const it of hits(row)) {
      if (it[1] < v0 || it[0] > v1) continue;
      const a = Math.max(LABEL, xOf(it[0])), b = xOf(it[1]);
      ctx.fillStyle = it[3];
      ctx.fillRect(a, y + 3, Math.max(1, b - a), ROW - 6);
    }
  });
  // Time axis.
  const y = rows.length * ROW + 12;
  ctx.fillStyle = "#555";
  for (let k = 0; k <= 5; k++) {
    const t = v0 + (v1 - v0) * k / 5, x = xOf(t);
    ctx.fillRect(x, y - 10, 1, 4);
    ctx.fillText(fmt(t), Math.min(x, w - 60), y);
  }
}
canvas.addEventListener("wheel", ev => {
  ev.preventDefault();
  const x = ev.offsetX;
  if (x < LABEL) return;
  const t = tOf(x), f = ev.deltaY > 0 ? 1.25 : 0.8;
  v0 = Math.max(0, t - (t - v0) * f);
  v1 = Math.min(Math.max(1, D.span_ns), t + (v1 - t) * f);
  if (v1 - v0 < 1000) v1 = v0 + 1000;
  draw();
}, { passive: false });
let dragging = null;
canvas.addEventListener("mousedown", ev => { dragging = { x: ev.offsetX, v0, v1 }; canvas.style.cursor = "grabbing"; });
window.addEventListener("mouseup", () => { dragging = null; canvas.style.cursor = "grab"; });
canvas.addEventListener("dblclick", () => { v0 = 0; v1 = Math.max(1, D.span_ns); draw(); });
const tip = document.getElementById("tooltip");
canvas.addEventListener("mousemove", ev => {
  if (dragging) {
    const dt = (ev.offsetX - dragging.x) / (canvas.clientWidth - LABEL - 4) * (dragging.v1 - dragging.v0);
    v0 = dragging.v0 - dt; v1 = dragging.v1 - dt;
    draw();
    return;
  }
  const row = rows[Math.floor(ev.offsetY / ROW)];
  tip.style.display = "none";
  if (!row || row.kind === "head" || ev.offsetX < LABEL) return;
  const t = tOf(ev.offsetX), slack = (v1 - v0) / canvas.clientWidth * 2;
  let best = null;
  for (const it of hits(row)) {
    if (it[0] - slack <= t && t <= it[1] + slack && (!best || it[1] - it[0] < best[1] - best[0])) best = it;
  }
  if (!best) return;
  tip.textContent = best[2] + "\n" + fmt(best[1] - best[0]) + " at " + fmt(best[0]);
  tip.style.left = (ev.offsetX + 12) + "px";
  tip.style.top = (ev.offsetY + 12) + "px";
  tip.style.display = "block";
});
canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
window.addEventListener("resize", resize);
resize();

// Utilization over time.
(function utilization() {
  const svg = document.getElementById("utilization");
  const W = 900, H = 160, left = 40;
  svg.setAttribute("width", W); svg.setAttribute("height", H + 40);
  svg.setAttribute("viewBox", "0 0 " + W + " " + (H + 40));
  const ns = "http://www.w3.org/2000/svg";
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  add("line", { x1: left, y1: H, x2: W, y2: H, stroke: "#999" });
  add("line", { x1: left, y1: 0, x2: left, y2: H, stroke: "#999" });
  add("text", { x: 4, y: 10 }, "100%");
  add("text", { x: 10, y: H }, "0");
  add("text", { x: W - 80, y: H + 14 }, fmt(D.span_ns));
  locs.forEach((l, i) => {
    const n = l.utilization.length;
    const pts = l.utilization.map((u, k) => (left + (W - left) * (k + 0.5) / n).toFixed(1) + "," + (H - u * H).toFixed(1));
    const color = "hsl(" + (i * 137 % 360) + ",60%,45%)";
    add("polyline", { points: pts.join(" "), fill: "none", stroke: color, "stroke-width": 1.5, class: "utilization-line" });
    add("text", { x: left + 10 + 120 * i, y: H + 32, fill: color }, "locality " + l.locality);
  });
})();

// Native code: compile total, then per loop.
(function native() {
  const box = document.getElementById("native"), n = D.native;
  if (!n || !n.loops.length) {
    document.getElementById("native-section").append(el("p", { class: "hint" }, "No fast loop ran in this trace."));
    return;
  }
  box.append(el("tr", {}, el("th", {}, "loop"), el("th", {}, "compile"), el("th", {}, "compiled"),
    el("th", {}, "cache hits"), el("th", {}, "runs"), el("th", {}, "native runs"), el("th", {}, "run time")));
  box.append(el("tr", {}, el("td", {}, "total"), el("td", {}, fmt(n.compile_ns + n.load_ns)),
    el("td", {}, String(n.compiled)), el("td", {}, String(n.disk_loads + n.process_loads)), el("td", {}, ""),
    el("td", {}, ""), el("td", {}, "")));
  for (const l of n.loops) {
    box.append(el("tr", {}, el("td", {}, l.name), el("td", {}, fmt(l.compile_ns)), el("td", {}, String(l.compiled)),
      el("td", {}, String(l.disk_loads + l.process_loads)), el("td", {}, String(l.runs)),
      el("td", {}, String(l.native_runs)), el("td", {}, fmt(l.run_ns))));
  }
})();

// Training steps.
(function steps() {
  const box = document.getElementById("steps");
  const any = locs.some(l => l.steps.length);
  if (!any) { box.append(el("p", { class: "hint" }, "No training steps in this trace (Sequential.fit records them).")); return; }
  const table = el("table", {}, el("tr", {}, el("th", {}, "locality"), el("th", {}, "steps"), el("th", {}, "mean step"),
    ...PHASES.map(p => el("th", {}, p.replace("_", " "))), el("th", {}, "split")));
  for (const l of locs) {
    if (!l.steps.length) continue;
    const split = l.steps.filter(s => s[3]);
    const mean = l.steps.reduce((a, s) => a + s[2], 0) / l.steps.length;
    const m = PHASES.map((p, i) => split.length ? split.reduce((a, s) => a + s[4 + i], 0) / split.length : 0);
    const total = Math.max(1, m.reduce((a, b) => a + b, 0));
    const bar = el("div", { class: "bar" }, ...m.map((v, i) => el("div", { style: "background:" + COLORS[PHASES[i]] + ";width:" + (100 * v / total) + "%" })));
    table.append(el("tr", {}, el("td", {}, "locality " + l.locality), el("td", {}, l.steps.length), el("td", {}, fmt(mean)),
      ...m.map(v => el("td", {}, fmt(v))), el("td", {}, bar)));
  }
  box.append(table);
  box.append(el("p", { class: "hint" }, "Phases from each step's events: forward until the gradient seed, backward until " +
    "its last computation (gradient buckets are reduced while it runs), communication wait for what is left until the " +
    "first optimizer update, optimizer until the last update; the rest is losses and metrics."));
})();

// Top primitives.
(function top() {
  const table = document.getElementById("top");
  const total = D.top.reduce((a, t) => a + t.exclusive_ns, 0);
  table.append(el("tr", {}, el("th", {}, "primitive"), el("th", {}, "family"), el("th", {}, "evaluations"),
    el("th", {}, "time"), el("th", {}, "share"), el("th", {}, "mean"), el("th", {}, "nodes")));
  for (const t of D.top.slice(0, 25)) {
    table.append(el("tr", { class: "top-row" }, el("td", {}, t.name), el("td", {}, t.family), el("td", {}, t.evaluations),
      el("td", {}, fmt(t.exclusive_ns)), el("td", {}, pct(t.exclusive_ns, total)),
      el("td", {}, fmt(t.exclusive_ns / Math.max(1, t.evaluations))), el("td", {}, t.nodes)));
  }
})();

// Execution trees.
(function trees() {
  const box = document.getElementById("tree");
  const source = document.getElementById("source");
  let selected = null;
  function show(position, line) {
    const m = /^(.*):(\d+)(?::(\d+))?$/.exec(position);
    source.textContent = "";
    if (!m) { source.textContent = position; return; }
    const file = m[1], at = +m[2];
    const text = D.sources[file];
    if (text === undefined) { source.textContent = position + "\n(the source of " + file + " is not in the trace)"; return; }
    const lines = text.split("\n");
    source.append(el("div", {}, position));
    for (let k = Math.max(1, at - 4); k <= Math.min(lines.length, at + 4); k++) {
      source.append(el("span", { class: k === at ? "here" : "" }, String(k).padStart(5) + "  " + lines[k - 1] + "\n"));
    }
    if (line) {
      if (selected) selected.classList.remove("selected");
      line.classList.add("selected");
      selected = line;
    }
  }
  D.programs.forEach(p => {
    const kids = p.nodes.map(() => []);
    p.nodes.forEach((n, i) => { if (n[0] >= 0) kids[n[0]].push(i); });
    // Nodes without time under them (variables, constants) are left out.
    const shown = i => p.nodes[i][5] > 0 || p.nodes[i][3] > 0;
    const rootTime = Math.max(1, p.nodes.length ? p.nodes[0][5] : 1);
    function item(i, depth) {
      const n = p.nodes[i];
      const li = el("li");
      const visible = kids[i].filter(shown);
      const toggle = el("span", { class: "toggle" }, visible.length ? (depth < 4 ? "\u25be" : "\u25b8") : "");
      const line = el("div", { class: "node", "data-position": L[n[2]] }, toggle, L[n[1]] + " ",
        el("span", { class: "t" }, "incl " + fmt(n[5]) + " (" + pct(n[5], rootTime) + ")" +
          (n[6] ? ", excl " + fmt(n[4]) + ", " + n[3] + " evals" + (n[7] ? ", " + n[7] + " spawned" : "") : "") +
          "  " + L[n[2]]));
      li.append(line);
      let sub = null;
      const open = () => {
        if (!sub) {
          sub = el("ul");
          visible.sort((a, b) => p.nodes[b][5] - p.nodes[a][5]).forEach(k => sub.append(item(k, depth + 1)));
          li.append(sub);
        } else {
          sub.style.display = sub.style.display === "none" ? "" : "none";
        }
        toggle.textContent = sub.style.display === "none" ? "\u25b8" : "\u25be";
      };
      toggle.addEventListener("click", ev => { ev.stopPropagation(); if (visible.length) open(); });
      line.addEventListener("click", () => show(L[n[2]], line));
      if (visible.length && depth < 4) open();
      return li;
    }
    box.append(el("div", { class: "program" }, el("b", {}, p.name), " (" + p.localities + (p.localities === 1 ? " locality" : " localities") + ")"));
    if (p.nodes.length) box.append(el("ul", {}, item(0, 0)));
  });
  if (!D.programs.length) box.textContent = "No program ran while the trace recorded.";
})();
// Everything above ran (the tests look for this mark).
document.body.dataset.rendered = "yes";
</script>
</body>
</html>
)HTML";

}  // namespace

std::string report_html(const TraceSet& set) { return std::string(kHead) + summary_json(set) + kTail; }

}  // namespace tessera::trace
