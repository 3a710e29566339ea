/* attnlab attention viewer (written for attnlab; no library, no network).
 *
 * Reads the page's <script id="attnlab-meta"> (JSON) and <script id="attnlab-data"> (one
 * zlib-compressed, base64 blob of arrays), then draws five views of the same weights:
 * the modality's own picture ("input"), the head view, the matrix view, the model view and
 * attention rollout. State: family, layer, selected heads, the chosen query.
 * window.attnlab exposes the decoded data and a few helpers (for tests and the console). */
(function () {
  "use strict";

  const meta = JSON.parse(document.getElementById("attnlab-meta").textContent);
  const HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
    "#7b4173", "#3182bd"];
  const VIRIDIS = ["#440154", "#472c7b", "#3a528b", "#2c728e", "#20908c", "#28ae7f", "#5ec961",
    "#addc30", "#fde724"].map(hexRgb);
  const MASKED_RGB = [221, 221, 221];
  const SVG = "http://www.w3.org/2000/svg";

  // query: the chosen query position; pinned: chosen by a click (hover no longer moves it)
  // scale: "linear" or "sqrt" colours (sqrt lifts the small weights of long inputs)
  const state = { fam: 0, layer: 0, heads: null, mode: null, query: null, pinned: false, zoom: 1,
    scale: "linear" };
  let raw = null;      // the inflated blob
  let families = [];   // decoded: [{name, queries, keys, square, layers: [{heads, w, bound, mask}], rollout}]
  let arrays = {};

  // ------------------------------------------------------------------ decoding
  async function inflate(b64) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let k = 0; k < bin.length; k++) bytes[k] = bin.charCodeAt(k);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function half(h) {  // IEEE 754 binary16 -> number
    const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * f * Math.pow(2, -24);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * Math.pow(2, e - 15);
  }

  function array(ref) {
    const count = ref.shape.reduce((a, b) => a * b, 1);
    const off = raw.byteOffset + ref.offset;
    if (ref.dtype === "u8") return new Uint8Array(raw.buffer, off, count);
    if (ref.dtype === "f32") return new Float32Array(raw.buffer, off, count);
    const h = new Uint16Array(raw.buffer, off, count), out = new Float32Array(count);
    for (let k = 0; k < count; k++) out[k] = half(h[k]);
    return out;
  }

  function weights(layer) {  // -> {w: Float32Array, bound: per-value error bound (function)}
    const q = array(layer.w);
    if (!layer.scale) {
      return { w: q, bound: (k) => Math.abs(q[k]) * Math.pow(2, -11) };
    }
    const scale = array(layer.scale), n = layer.w.shape[2], L = layer.levels, w = new Float32Array(q.length);
    for (let k = 0; k < q.length; k++) w[k] = q[k] / L * scale[(k / n) | 0];
    return { w: w, bound: (k) => scale[(k / n) | 0] / (2 * L) };
  }

  function decode() {
    families = meta.attentions.map((f) => ({
      name: f.name, queries: f.queries, keys: f.keys, square: f.square,
      ni: f.queries.length, nj: f.keys.length,
      layers: f.layers.map((l) => Object.assign({ heads: l.heads, mask: l.mask ? array(l.mask) : null },
        weights(l))),
      rollout: f.rollout ? Object.assign({ heads: 1, mask: null }, weights(f.rollout)) : null,
    }));
    for (const [k, ref] of Object.entries(meta.arrays)) arrays[k] = { data: array(ref), shape: ref.shape };
  }

  // ------------------------------------------------------------------ the weights
  const fam = () => families[state.fam];
  const lay = () => fam().layers[Math.min(state.layer, fam().layers.length - 1)];
  const idx = (f, h, i, j) => (h * f.ni + i) * f.nj + j;
  function selectedHeads(layer) {
    const l = layer || lay();
    const hs = [...state.heads].filter((h) => h < l.heads).sort((a, b) => a - b);
    return hs.length ? hs : (l.heads === 1 ? [0] : []);
  }
  function isMasked(l, h, i, j) { return l.mask ? l.mask[idx(fam(), h, i, j)] > 0 : false; }
  function meanWeight(l, hs, i, j) {  // mean over heads hs; null when masked in all of them
    let s = 0, live = 0;
    for (const h of hs) { if (!isMasked(l, h, i, j)) { s += l.w[idx(fam(), h, i, j)]; live++; } }
    return live ? s / hs.length : null;
  }
  function rowMax(l, hs) {
    let m = 0;
    for (const h of hs) for (let k = h * fam().ni * fam().nj; k < (h + 1) * fam().ni * fam().nj; k++) {
      if (l.w[k] > m) m = l.w[k];
    }
    return m || 1e-6;
  }

  // ------------------------------------------------------------------ colours
  function hexRgb(h) { return [1, 3, 5].map((k) => parseInt(h.slice(k, k + 2), 16)); }
  /** The colour of weight w on a scale whose top is max, linear or square-root. */
  function shade(w, max) { const t = w / max; return viridis(state.scale === "sqrt" ? Math.sqrt(t) : t); }
  function viridis(t) {
    t = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
    const k = Math.min(VIRIDIS.length - 2, Math.floor(t)), f = t - k, a = VIRIDIS[k], b = VIRIDIS[k + 1];
    return [0, 1, 2].map((c) => Math.round(a[c] + (b[c] - a[c]) * f));
  }
  const rgb = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;

  // ------------------------------------------------------------------ readout and tooltip
  const tooltip = () => document.getElementById("tooltip");
  function fmt(w) { return w === null ? "masked" : w.toFixed(4); }
  /** Show the weights of pair (i, j) of the current layer (or the rollout) head by head. */
  function readPair(i, j, ev, source) {
    const f = fam(), l = source || lay(), hs = source ? [0] : selectedHeads(l);
    const parts = [], values = [], bounds = [];
    for (const h of hs) {
      const k = idx(f, h, i, j);
      const m = isMasked(l, h, i, j);
      values.push(m ? "masked" : String(l.w[k]));
      bounds.push(m ? "0" : String(l.bound(k)));
      parts.push(`${source ? "rollout" : "h" + (h + 1)}: ${m ? "masked" : l.w[k].toFixed(4) + " ±" + l.bound(k).toExponential(1)}`);
    }
    const what = source ? "rollout" : `layer ${state.layer + 1}`;
    const text = `${what}  ${f.queries[i]} [${i}] → ${f.keys[j]} [${j}]\n${parts.join("   ")}`;
    const r = document.getElementById("readout");
    r.textContent = text;
    Object.assign(r.dataset, { family: f.name, layer: source ? "rollout" : String(state.layer),
      i: String(i), j: String(j), heads: hs.join(","), weights: values.join(","), bounds: bounds.join(",") });
    if (ev) {
      const t = tooltip();
      t.textContent = text;
      t.style.display = "block";
      t.style.left = Math.min(ev.clientX + 14, window.innerWidth - 340) + "px";
      t.style.top = (ev.clientY + 14) + "px";
    }
  }
  function hideTip() { tooltip().style.display = "none"; }

  // ------------------------------------------------------------------ controls
  function el(tag, attrs, parent, text) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  const MODES = [["input", "input"], ["head", "head view"], ["matrix", "matrix"],
    ["model", "model view"], ["rollout", "rollout"]];

  function buildChrome() {
    const app = document.getElementById("app");
    app.textContent = "";
    const header = el("header", {}, app);
    el("h1", {}, header, meta.title || "attention");
    if (meta.prediction) el("div", { class: "prediction", id: "prediction" }, header, meta.prediction);
    for (const n of meta.notes) el("div", { class: "notes" }, header, n);
    const nav = el("nav", { class: "controls" }, app);
    const tabs = el("span", { class: "tabs" }, nav);
    for (const [mode, name] of MODES) {
      if (mode === "input" && meta.modality.kind === "text") continue;
      const b = el("button", { "data-mode": mode, id: "tab-" + mode }, tabs, name);
      b.onclick = () => { state.mode = mode; draw(); };
    }
    if (families.length > 1) {
      const box = el("span", {}, nav);
      el("label", { for: "family" }, box, "attention");
      const s = el("select", { id: "family" }, box);
      families.forEach((f, k) => el("option", { value: k }, s, f.name));
      s.onchange = () => { state.fam = +s.value; state.layer = 0; state.query = null; resetHeads(); draw(); };
    }
    const lbox = el("span", {}, nav);
    el("label", { for: "layer" }, lbox, "layer");
    el("select", { id: "layer" }, lbox).onchange = (e) => { state.layer = +e.target.value; resetHeads(true); draw(); };
    const hbox = el("span", {}, nav);
    el("label", {}, hbox, "heads");
    el("span", { class: "heads", id: "heads" }, hbox);
    const sbox = el("span", {}, nav);
    el("label", { for: "scale" }, sbox, "colours");
    const sc = el("select", { id: "scale" }, sbox);
    el("option", { value: "linear" }, sc, "linear");
    el("option", { value: "sqrt" }, sc, "square root");
    sc.onchange = () => { state.scale = sc.value; draw(); };
    const z = el("span", { class: "zoom", id: "zoom" }, nav);
    el("label", {}, z, "zoom");
    el("button", { id: "zoom-out" }, z, "−").onclick = () => { state.zoom = Math.max(0.25, state.zoom / 2); draw(); };
    el("button", { id: "zoom-in" }, z, "+").onclick = () => { state.zoom = Math.min(16, state.zoom * 2); draw(); };
    el("div", { id: "stage" }, app);
    el("div", { id: "readout" }, app, "hover a weight to read it; click a query to pin it");
    el("div", { id: "tooltip" }, document.body);
    const foot = el("footer", {}, app);
    foot.textContent = meta.precision === "float16"
      ? "Weights stored as float16 (each within 2^-11 of the model's, relative); masked pairs are hatched grey, never zero."
      : `Weights stored in ${meta.precision.split("-")[0]} bits with each row's maximum as scale (each within max/${2 * (2 ** parseInt(meta.precision)) - 2} of the model's); masked pairs are hatched grey, never zero.`;
  }

  function resetHeads(keep) {
    const l = lay();
    if (keep && state.heads && [...state.heads].some((h) => h < l.heads)) return;
    state.heads = new Set([...Array(l.heads).keys()]);
  }

  function syncControls() {
    for (const b of document.querySelectorAll("nav .tabs button")) b.classList.toggle("active", b.dataset.mode === state.mode);
    const ls = document.getElementById("layer");
    const n = fam().layers.length;
    if (ls.options.length !== n) {
      ls.textContent = "";
      for (let k = 0; k < n; k++) el("option", { value: k }, ls, String(k + 1));
    }
    ls.value = String(state.layer);
    document.getElementById("scale").value = state.scale;
    ls.disabled = state.mode === "rollout" || state.mode === "model";
    const hb = document.getElementById("heads");
    hb.textContent = "";
    const l = lay();
    for (let h = 0; h < l.heads; h++) {
      const s = el("span", { class: "head" + (state.heads.has(h) ? "" : " off"), "data-head": h,
        title: "click: show/hide head " + (h + 1) + "; double-click: only this head" }, hb, String(h + 1));
      s.style.background = HEAD_COLOURS[h % HEAD_COLOURS.length];
      s.onclick = () => { state.heads.has(h) ? state.heads.delete(h) : state.heads.add(h); draw(); };
      s.ondblclick = () => { state.heads = new Set([h]); draw(); };
    }
    document.getElementById("zoom").style.display = state.mode === "matrix" || state.mode === "rollout" ? "" : "none";
  }

  function setQuery(i) { state.query = state.query === i ? null : i; draw(); }
  /** A click on an input's part: pin it as the query (a second click releases it). */
  function pick(i) {
    if (state.pinned && state.query === i) state.pinned = false;
    else { state.query = i; state.pinned = true; }
    draw();
  }
  /** Hovering an input's part makes it the query, until one is pinned. */
  function hoverPick(i) { if (!state.pinned && state.query !== i) { state.query = i; draw(); } }

  // ------------------------------------------------------------------ the views
  function draw() {
    syncControls();
    const stage = document.getElementById("stage");
    stage.textContent = "";
    hideTip();
    ({ input: drawInput, head: drawHeadView, matrix: drawMatrixView, model: drawModelView,
      rollout: drawRollout })[state.mode](stage);
  }

  function hint(stage, text) { el("p", { class: "hint" }, stage, text); }

  /** Head view: queries left, keys right, a line per (query, key, head), opacity = weight. */
  function drawHeadView(stage) {
    const f = fam(), l = lay(), hs = selectedHeads(l);
    const n = Math.max(f.ni, f.nj), rowH = n > 80 ? Math.max(8, Math.floor(1400 / n)) : 18;
    const width = 560, colW = 140, top = 24, height = top + n * rowH + 10;
    const all = state.query === null && f.ni * f.nj * hs.length <= 40000;
    hint(stage, (state.query === null
      ? (all ? "Every query's attention (hover a query on the left to pick it, click to pin; hover a key for its weights)."
        : "Hover or click a query on the left to see what it attends to.")
      : `Query ${f.queries[state.query]} [${state.query}] pinned: click it again to release. Hover a key for its weights.`) +
      " Line opacity and width: a weight relative to its query's largest (per head).");
    const svg = el("svg:svg", { width: width, height: height, id: "headview" }, stage);
    el("svg:text", { x: colW, y: 14, "text-anchor": "end", class: "legend" }, svg, "queries");
    el("svg:text", { x: width - colW, y: 14, class: "legend" }, svg, "keys");
    const step = Math.ceil(11 / rowH);
    const lines = el("svg:g", { id: "lines" }, svg);
    const y = (p) => top + p * rowH + rowH / 2;
    function drawLines(query) {
      lines.textContent = "";
      const rows = query === null ? (all ? [...Array(f.ni).keys()] : []) : [query];
      for (const h of hs) {
        for (const i of rows) {
          // opacity and width relative to the row's largest weight: readable at any length
          let top = 1e-9;
          for (let j = 0; j < f.nj; j++) if (!isMasked(l, h, i, j)) top = Math.max(top, l.w[idx(f, h, i, j)]);
          for (let j = 0; j < f.nj; j++) {
            if (isMasked(l, h, i, j)) continue;
            const r = l.w[idx(f, h, i, j)] / top;
            if (r < 0.05) continue;
            el("svg:line", { x1: colW + 6, y1: y(i), x2: width - colW - 6, y2: y(j), stroke: HEAD_COLOURS[h % HEAD_COLOURS.length],
              "stroke-opacity": (query === null ? 0.6 : 0.9) * r, "stroke-width": 0.5 + 2.5 * r,
              "data-i": i, "data-j": j, "data-head": h }, lines);
          }
        }
      }
    }
    for (let i = 0; i < f.ni; i++) {
      const t = el("svg:text", { x: colW, y: y(i) + 4, "text-anchor": "end", class: "tok q" + (state.query === i ? " selected" : ""), "data-i": i },
        svg, i % step === 0 || state.query === i ? f.queries[i] : "·");
      t.onmouseenter = () => { if (state.query === null) drawLines(i); };
      t.onmouseleave = () => { if (state.query === null) drawLines(null); };
      t.onclick = () => setQuery(i);
    }
    for (let j = 0; j < f.nj; j++) {
      const t = el("svg:text", { x: width - colW, y: y(j) + 4, class: "tok k", "data-j": j }, svg, j % step === 0 ? f.keys[j] : "·");
      t.onmousemove = (ev) => { if (state.query !== null) readPair(state.query, j, ev); };
      t.onmouseleave = hideTip;
    }
    drawLines(state.query);
  }

  /** A weight matrix on a canvas: one cell per (i, j), masked pairs hatched, a colour bar. */
  function matrixCanvas(parent, f, l, hs, opts) {
    const n = Math.max(f.ni, f.nj);
    const cell = Math.max(1, Math.min(28, Math.floor(640 / n))) * (opts.zoom || 1);
    const labels = opts.labels !== false;
    const ml = labels ? 92 : 0, mt = labels ? 92 : 0;
    const W = ml + f.nj * cell, H = mt + f.ni * cell;
    const c = el("canvas", { width: Math.ceil(W), height: Math.ceil(H), class: "matrix" }, parent);
    const g = c.getContext("2d");
    const max = opts.max || rowMax(l, hs);
    const img = g.createImageData(f.nj, f.ni);
    for (let i = 0; i < f.ni; i++) for (let j = 0; j < f.nj; j++) {
      const w = meanWeight(l, hs, i, j);
      const col = w === null ? MASKED_RGB : shade(w, max);
      const k = 4 * (i * f.nj + j);
      img.data[k] = col[0]; img.data[k + 1] = col[1]; img.data[k + 2] = col[2]; img.data[k + 3] = 255;
    }
    const off = document.createElement("canvas");
    off.width = f.nj; off.height = f.ni;
    off.getContext("2d").putImageData(img, 0, 0);
    g.imageSmoothingEnabled = false;
    g.drawImage(off, ml, mt, f.nj * cell, f.ni * cell);
    if (cell >= 5) {  // hatch the masked cells
      g.strokeStyle = "#999"; g.lineWidth = 1;
      for (let i = 0; i < f.ni; i++) for (let j = 0; j < f.nj; j++) {
        if (meanWeight(l, hs, i, j) !== null) continue;
        const x = ml + j * cell, yy = mt + i * cell;
        g.beginPath(); g.moveTo(x, yy + cell); g.lineTo(x + cell, yy); g.stroke();
      }
    }
    if (state.query !== null && state.query < f.ni) {
      g.strokeStyle = "#e4002b"; g.lineWidth = 2;
      g.strokeRect(ml, mt + state.query * cell, f.nj * cell, cell);
    }
    if (labels) {
      g.fillStyle = "#1d2330"; g.font = "11px system-ui, sans-serif";
      const step = Math.ceil(12 / cell);
      g.textAlign = "right"; g.textBaseline = "middle";
      for (let i = 0; i < f.ni; i += step) g.fillText(short(f.queries[i]), ml - 4, mt + (i + 0.5) * cell);
      for (let j = 0; j < f.nj; j += step) {
        g.save(); g.translate(ml + (j + 0.5) * cell, mt - 4); g.rotate(-Math.PI / 2);
        g.textAlign = "left"; g.fillText(short(f.keys[j]), 0, 0); g.restore();
      }
      g.fillStyle = "#667085"; g.textAlign = "left";
      g.fillText("keys →", 2, 10); g.fillText("queries ↓", 2, 24);
    }
    const at = (ev) => {
      const r = c.getBoundingClientRect();
      const j = Math.floor((ev.clientX - r.left - ml) / cell), i = Math.floor((ev.clientY - r.top - mt) / cell);
      return i >= 0 && j >= 0 && i < f.ni && j < f.nj ? [i, j] : null;
    };
    c.onmousemove = (ev) => { const p = at(ev); if (p) readPair(p[0], p[1], ev, opts.source); else hideTip(); };
    c.onmouseleave = hideTip;
    c.onclick = (ev) => { const p = at(ev); if (p) setQuery(p[0]); };
    c.cellCenter = (i, j) => [ml + (j + 0.5) * cell, mt + (i + 0.5) * cell];
    colourBar(parent, max, l.mask !== null, opts.barLabel || "attention weight");
    return c;
  }

  function colourBar(parent, max, masked, label) {
    const box = el("div", { class: "colourbar" }, parent);
    const c = el("canvas", { width: 70, height: 260, id: "colourbar" }, box);
    const g = c.getContext("2d");
    for (let y = 0; y < 220; y++) { g.fillStyle = rgb(viridis(1 - y / 219)); g.fillRect(4, 10 + y, 16, 1); }
    g.fillStyle = "#1d2330"; g.font = "11px system-ui, sans-serif"; g.textBaseline = "middle";
    for (const t of [0, 0.25, 0.5, 0.75, 1]) {  // the weight at that height of the bar
      const w = max * (state.scale === "sqrt" ? t * t : t);
      g.fillText(w.toFixed(max < 0.01 ? 4 : 3), 24, 10 + 219 * (1 - t));
    }
    g.save(); g.translate(66, 120); g.rotate(-Math.PI / 2); g.textAlign = "center"; g.fillText(label, 0, 0); g.restore();
    if (masked) { const m = el("div", { class: "legend" }, box); el("span", { class: "swatch masked-swatch" }, m); m.append("masked / absent"); }
  }

  function short(s) { s = String(s); return s.length > 12 ? s.slice(0, 11) + "…" : s; }

  function drawMatrixView(stage) {
    const f = fam(), l = lay(), hs = selectedHeads(l);
    if (!hs.length) return hint(stage, "No head selected: click a head's number above.");
    hint(stage, `Layer ${state.layer + 1}, ${hs.length === 1 ? "head " + (hs[0] + 1) : "mean of heads " + hs.map((h) => h + 1).join(", ")}: row i is query i (it sums to 1), column j key j. Hover for the exact weight, click to pin a query.`);
    const row = el("div", { class: "row" }, stage);
    matrixCanvas(row, f, l, hs, { zoom: state.zoom });
  }

  function drawModelView(stage) {
    const f = fam();
    hint(stage, "Every layer (rows) and head (columns), each on its own scale. Click one to open it in the matrix view.");
    const maxHeads = Math.max(...f.layers.map((l) => l.heads));
    const grid = el("div", { class: "grid-model" }, stage);
    grid.style.gridTemplateColumns = `repeat(${maxHeads}, auto)`;
    const side = Math.max(48, Math.min(140, Math.floor(1100 / maxHeads) - 10));
    f.layers.forEach((l, li) => {
      for (let h = 0; h < maxHeads; h++) {
        const fig = el("figure", { "data-layer": li, "data-head": h }, grid);
        if (h >= l.heads) continue;
        const c = el("canvas", { width: side, height: side }, fig);
        thumbnail(c, f, l, h, side);
        el("figcaption", {}, fig, `L${li + 1} H${h + 1}`);
        fig.onclick = () => { state.layer = li; state.heads = new Set([h]); state.mode = "matrix"; draw(); };
      }
    });
  }

  function thumbnail(c, f, l, h, side) {
    const g = c.getContext("2d"), img = g.createImageData(side, side);
    let max = 1e-6;
    for (let k = h * f.ni * f.nj; k < (h + 1) * f.ni * f.nj; k++) if (l.w[k] > max) max = l.w[k];
    for (let y = 0; y < side; y++) for (let x = 0; x < side; x++) {
      const i = Math.floor(y * f.ni / side), j = Math.floor(x * f.nj / side);
      const col = isMasked(l, h, i, j) ? MASKED_RGB : shade(l.w[idx(f, h, i, j)], max);
      const k = 4 * (y * side + x);
      img.data[k] = col[0]; img.data[k + 1] = col[1]; img.data[k + 2] = col[2]; img.data[k + 3] = 255;
    }
    g.putImageData(img, 0, 0);
  }

  function drawRollout(stage) {
    const f = fam();
    if (!f.rollout) return hint(stage, "Rollout needs two or more self-attention layers over the same positions; this attention has none.");
    hint(stage, "Attention rollout (Abnar & Zuidema, 2020): the heads' mean plus the residual (identity) per layer, rows normalised, multiplied from the first layer up. Row i: how much output i draws on input j through every layer.");
    const row = el("div", { class: "row" }, stage);
    matrixCanvas(row, f, f.rollout, [0], { zoom: state.zoom, source: f.rollout, barLabel: "rollout weight" });
    if (meta.modality.kind === "image") imagePanel(row, f.rollout, [0], "rollout");
  }

  // ------------------------------------------------------------------ the modalities
  function drawInput(stage) {
    ({ speech: drawSpeech, image: drawImage, graph: drawGraph, molecule: drawMolecule })[meta.modality.kind](stage);
  }

  /** The query's weights over keys for the selected heads: per head, and their mean. */
  function queryRow(l, hs, i) {
    const f = fam();
    return hs.map((h) => Array.from({ length: f.nj }, (_, j) => isMasked(l, h, i, j) ? null : l.w[idx(f, h, i, j)]));
  }

  function drawSpeech(stage) {
    const m = meta.modality, f = fam(), l = lay(), hs = selectedHeads(l);
    const spec = arrays.spectrogram, [mels, cols] = spec.shape;
    const W = Math.max(600, Math.min(1300, cols * 3)), specH = 160, plotH = 150, ml = 48;
    const seconds = cols * m.hop_s;
    const xOfT = (t) => ml + t / seconds * W;
    const posT = (p) => (p + 0.5) * m.position_s;
    if (state.query === null) state.query = Math.floor(f.ni / 2);
    hint(stage, `Hover or click the spectrogram to choose the query frame (now ${posT(state.query).toFixed(2)} s); below, what it attends to over time${m.window ? ", inside its window (shaded)" : ""}.`);
    const c = el("canvas", { width: ml + W + 110, height: specH + plotH + 60, id: "speech" }, stage);
    const g = c.getContext("2d");
    const img = g.createImageData(cols, mels);
    for (let r = 0; r < mels; r++) for (let t = 0; t < cols; t++) {
      const col = viridis(spec.data[r * cols + t] / 255), k = 4 * ((mels - 1 - r) * cols + t);
      img.data[k] = col[0]; img.data[k + 1] = col[1]; img.data[k + 2] = col[2]; img.data[k + 3] = 255;
    }
    const off = document.createElement("canvas"); off.width = cols; off.height = mels;
    off.getContext("2d").putImageData(img, 0, 0);
    g.drawImage(off, ml, 0, W, specH);
    g.font = "11px system-ui, sans-serif"; g.fillStyle = "#1d2330";
    g.save(); g.translate(12, specH / 2); g.rotate(-Math.PI / 2); g.textAlign = "center"; g.fillText("mel band", 0, 0); g.restore();
    const y0 = specH + 12, y1 = y0 + plotH;
    const row = queryRow(l, hs, state.query);
    let max = 1e-6; for (const r of row) for (const w of r) if (w !== null && w > max) max = w;
    if (m.window) {  // the positions the query may see
      const a = Math.max(0, state.query - m.window[0]), b = Math.min(f.nj - 1, state.query + m.window[1]);
      g.fillStyle = "rgba(47,91,211,0.10)";
      g.fillRect(xOfT(a * m.position_s), 0, xOfT((b + 1) * m.position_s) - xOfT(a * m.position_s), y1);
    }
    g.strokeStyle = "#e4002b"; g.lineWidth = 1.5;
    g.beginPath(); g.moveTo(xOfT(posT(state.query)), 0); g.lineTo(xOfT(posT(state.query)), y1); g.stroke();
    g.strokeStyle = "#ccc"; g.strokeRect(ml, y0, W, plotH);
    const end = f.nj * m.position_s;  // the encoder's last frame ends here
    if (end < seconds) {
      g.fillStyle = "#e6e6e6"; g.fillRect(xOfT(end), y0, xOfT(seconds) - xOfT(end), plotH);
      g.fillStyle = "#667085"; g.fillText("no encoder frame", xOfT(end) + 4, y0 + 14);
    }
    hs.forEach((h, n) => {
      g.strokeStyle = HEAD_COLOURS[h % HEAD_COLOURS.length]; g.lineWidth = 1.3; g.beginPath();
      let pen = false;
      row[n].forEach((w, j) => {
        if (w === null) { pen = false; return; }
        const x = xOfT(posT(j)), y = y1 - w / max * (plotH - 6);
        pen ? g.lineTo(x, y) : g.moveTo(x, y); pen = true;
      });
      g.stroke();
    });
    g.fillStyle = "#1d2330"; g.textAlign = "center";
    const tick = [0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10].find((t) => seconds / t <= 10) || 30;
    for (let t = 0; t <= seconds + 1e-9; t += tick) {
      g.fillText(t.toFixed(2), xOfT(t), y1 + 14);
      g.fillRect(xOfT(t), y1, 1, 4);
    }
    g.fillText("time (s)", ml + W / 2, y1 + 30);
    g.textAlign = "right"; g.fillText(max.toFixed(3), ml - 4, y0 + 8); g.fillText("0", ml - 4, y1);
    g.save(); g.translate(12, y0 + plotH / 2); g.rotate(-Math.PI / 2); g.textAlign = "center";
    g.fillText("weight", 0, 0); g.restore();
    const at = (ev) => {
      const r = c.getBoundingClientRect(), t = (ev.clientX - r.left - ml) / W * seconds;
      return { i: Math.max(0, Math.min(f.ni - 1, Math.floor(t / m.position_s))), y: ev.clientY - r.top };
    };
    c.onmousemove = (ev) => {
      const p = at(ev);
      if (p.y > y0) readPair(state.query, Math.min(f.nj - 1, p.i), ev);
      else { hideTip(); if (p.y <= specH) hoverPick(p.i); }
    };
    c.onclick = (ev) => { const p = at(ev); if (p.y <= specH) pick(p.i); };
    c.onmouseleave = hideTip;
    c.positionX = (p) => xOfT(posT(p));
  }

  /** Two canvases: the image with its token grid and the query's box, and the query's
   * attention over the grid (opaque colours, the image faintly on top). */
  function imagePanel(parent, l, hs, label) {
    const m = meta.modality, f = fam(), px = arrays.pixels, [H, W] = px.shape;
    const rgbImg = px.shape.length === 3;
    const scale = Math.max(1, Math.floor(300 / Math.max(H, W)));
    const [rows, cols] = m.grid, cls = m.prefix || 0;
    const img = new ImageData(W, H);
    for (let k = 0; k < H * W; k++) {
      for (let ch = 0; ch < 3; ch++) img.data[4 * k + ch] = rgbImg ? px.data[3 * k + ch] : px.data[k];
      img.data[4 * k + 3] = 255;
    }
    const off = document.createElement("canvas"); off.width = W; off.height = H;
    off.getContext("2d").putImageData(img, 0, 0);
    const cw = W * scale / cols, ch = H * scale / rows;
    const q = state.query === null ? 0 : state.query;
    const w = Array.from({ length: f.nj - cls }, (_, j) => meanWeight(l, hs, q, j + cls));
    const max = Math.max(1e-6, ...w.filter((v) => v !== null));
    const canvases = [];
    for (const kind of ["input", "heat"]) {
      const c = el("canvas", { width: W * scale, height: H * scale, class: "pixelated",
        id: kind === "heat" ? "image-" + label : "image-input-" + label }, parent);
      const g = c.getContext("2d");
      g.imageSmoothingEnabled = false;
      if (kind === "heat") {
        for (let p = 0; p < w.length; p++) {
          g.fillStyle = w[p] === null ? "#ddd" : rgb(shade(w[p], max));
          g.fillRect((p % cols) * cw, Math.floor(p / cols) * ch, cw, ch);
        }
        g.globalAlpha = 0.3;
      }
      g.drawImage(off, 0, 0, W * scale, H * scale);
      g.globalAlpha = 1;
      g.strokeStyle = "rgba(255,255,255,0.35)"; g.lineWidth = 1;
      for (let r = 0; r <= rows; r++) { g.beginPath(); g.moveTo(0, r * ch); g.lineTo(W * scale, r * ch); g.stroke(); }
      for (let cc = 0; cc <= cols; cc++) { g.beginPath(); g.moveTo(cc * cw, 0); g.lineTo(cc * cw, H * scale); g.stroke(); }
      if (q >= cls) {
        const p = q - cls; g.strokeStyle = "#e4002b"; g.lineWidth = 2;
        g.strokeRect((p % cols) * cw, Math.floor(p / cols) * ch, cw, ch);
      }
      const at = (ev) => {
        const r = c.getBoundingClientRect();
        const cc = Math.floor((ev.clientX - r.left) / cw), rr = Math.floor((ev.clientY - r.top) / ch);
        return cc >= 0 && rr >= 0 && cc < cols && rr < rows ? cls + rr * cols + cc : null;
      };
      c.onmousemove = (ev) => {
        const p = at(ev);
        if (p === null) return;
        if (state.pinned) readPair(q, p, ev, label === "rollout" ? l : undefined);
        else hoverPick(p);
      };
      c.onmouseleave = hideTip;
      c.onclick = (ev) => { const p = at(ev); if (p !== null) pick(p); };
      c.patchCenter = (p) => [((p - cls) % cols + 0.5) * cw, (Math.floor((p - cls) / cols) + 0.5) * ch];
      canvases.push(c);
    }
    return canvases[1];
  }

  function drawImage(stage) {
    const m = meta.modality, f = fam(), l = lay(), hs = selectedHeads(l);
    const q = state.query === null ? 0 : state.query;
    const pre = m.prefix || 0;
    const who = q < pre ? "the class token" : `cell ${f.queries[q]}`;
    hint(stage, `The attention of ${who} (red box) over the image's ${m.grid[0]} × ${m.grid[1]} grid, layer ${state.layer + 1}, ${hs.length === 1 ? "head " + (hs[0] + 1) : "mean of the selected heads"}. ${state.pinned ? "Pinned: hover cells for their weights, click it again to release" : "Hover a cell to make it the query, click to pin it"}${pre ? "; the button returns to the class token" : ""}. Rollout: the tab above.`);
    if (pre) el("button", { id: "cls" }, stage, "class token as query").onclick = () => { state.query = 0; state.pinned = true; draw(); };
    const row = el("div", { class: "row" }, stage);
    imagePanel(row, l, hs, "attention");
    colourBar(row, Math.max(1e-6, ...Array.from({ length: f.nj }, (_, j) => meanWeight(l, hs, q, j) || 0)), l.mask !== null, "attention weight");
  }

  function drawGraph(stage) {
    const m = meta.modality, f = fam(), l = lay(), hs = selectedHeads(l);
    if (state.query === null) state.query = m.center;
    const q = state.query, S = 620, pad = 30;
    hint(stage, `Node ${f.queries[q]}'s attention over its in-neighbours (only real edges exist): edge width and colour = the weight (${hs.length === 1 ? "head " + (hs[0] + 1) : "mean of the selected heads"}), layer ${state.layer + 1}. ${state.pinned ? "Pinned: click it again to release; hover an edge for its weights." : "Hover a node to make it the query, click to pin it."}`);
    const row = el("div", { class: "row" }, stage);
    const svg = el("svg:svg", { width: S, height: S, id: "graph" }, row);
    const X = (p) => pad + m.xy[p][0] * (S - 2 * pad), Y = (p) => pad + m.xy[p][1] * (S - 2 * pad);
    let max = 1e-6;
    const inc = [];
    for (const [s, t] of m.edges) if (t === q) { const w = meanWeight(l, hs, q, s); if (w !== null) { inc.push([s, w]); max = Math.max(max, w); } }
    for (const [s, t] of m.edges) el("svg:line", { x1: X(s), y1: Y(s), x2: X(t), y2: Y(t), stroke: "#d0d5dd", "stroke-width": 1 }, svg);
    for (const [s, w] of inc) {
      const ln = el("svg:line", { x1: X(s), y1: Y(s), x2: X(q), y2: Y(q), stroke: rgb(shade(w, max)), "stroke-width": 1 + 7 * w / max,
        class: "attn-edge", "data-j": s, "stroke-linecap": "round" }, svg);
      ln.onmousemove = (ev) => readPair(q, s, ev);
      ln.onmouseleave = hideTip;
    }
    m.nodes.forEach((name, p) => {
      const g = el("svg:g", { class: "node", "data-i": p, cursor: "pointer" }, svg);
      el("svg:circle", { cx: X(p), cy: Y(p), r: p === q ? 9 : 6, fill: p === q ? "#e4002b" : "#fff", stroke: "#1d2330" }, g);
      el("svg:text", { x: X(p) + 9, y: Y(p) - 7, "font-size": 10 }, g, name + (m.node_labels ? " " + m.node_labels[p] : ""));
      g.onclick = () => pick(p);
      g.onmouseenter = () => hoverPick(p);
    });
    colourBar(row, max, false, "attention weight");
  }

  function drawMolecule(stage) {
    const m = meta.modality, f = fam(), l = lay(), hs = selectedHeads(l);
    const useReadout = state.query === null && m.readout;
    const q = state.query === null ? 0 : state.query;
    const tint = useReadout ? m.readout : Array.from({ length: f.nj }, (_, j) => meanWeight(l, hs, q, j));
    hint(stage, useReadout ? "Atoms shaded by the pooling (readout) attention: what the prediction reads from each atom. Click an atom to see its attention instead."
      : `Atoms shaded by the attention of atom ${f.queries[q]} (red ring), layer ${state.layer + 1}. Click another atom${m.readout ? ", or the button for the readout" : ""}.`);
    if (m.readout) el("button", { id: "readout-button" }, stage, "pooling (readout) attention").onclick = () => { state.query = null; state.pinned = false; draw(); };
    const row = el("div", { class: "row" }, stage);
    const S = 520, pad = 40;
    const xs = m.xy.map((p) => p[0]), ys = m.xy.map((p) => p[1]);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const span = Math.max(x1 - x0, y1 - y0, 1e-6);
    const X = (p) => pad + (m.xy[p][0] - x0) / span * (S - 2 * pad), Y = (p) => S - pad - (m.xy[p][1] - y0) / span * (S - 2 * pad);
    const svg = el("svg:svg", { width: S, height: S, id: "molecule" }, row);
    for (const [a, b, order] of m.bonds) {
      el("svg:line", { x1: X(a), y1: Y(a), x2: X(b), y2: Y(b), stroke: "#444", "stroke-width": order > 1.2 ? 4 : 1.6 }, svg);
      if (order > 1.2) el("svg:line", { x1: X(a), y1: Y(a), x2: X(b), y2: Y(b), stroke: "#fff", "stroke-width": 1.2 }, svg);
    }
    const max = Math.max(1e-6, ...tint.filter((v) => v !== null));
    m.atoms.forEach((sym, p) => {
      const g = el("svg:g", { class: "atom", "data-i": p, cursor: "pointer" }, svg);
      const w = tint[p];
      el("svg:circle", { cx: X(p), cy: Y(p), r: 13, fill: w === null ? "#ddd" : rgb(shade(w, max)),
        stroke: !useReadout && p === q ? "#e4002b" : "#444", "stroke-width": !useReadout && p === q ? 3 : 1 }, g);
      el("svg:text", { x: X(p), y: Y(p) + 4, "text-anchor": "middle", "font-size": 11, fill: w !== null && w / max < 0.6 ? "#fff" : "#000" }, g, sym);
      g.onclick = () => pick(p);
      g.onmousemove = (ev) => { if (state.pinned) readPair(q, p, ev); };
      g.onmouseleave = hideTip;
    });
    colourBar(row, max, false, useReadout ? "readout weight" : "attention weight");
  }

  // ------------------------------------------------------------------ start
  async function main() {
    raw = await inflate(document.getElementById("attnlab-data").textContent.trim());
    decode();
    state.mode = meta.modality.kind === "text" ? "head" : "input";
    resetHeads();
    buildChrome();
    draw();
    window.attnlab = { meta, families, state, draw, setQuery,
      select: (changes) => { Object.assign(state, changes); if (changes.heads) state.heads = new Set(changes.heads); draw(); } };
    window[meta.ready_flag] = true;
  }
  main().catch((e) => {
    document.getElementById("app").textContent = "The attention viewer could not start: " + e;
    console.error(e);
  });
})();
