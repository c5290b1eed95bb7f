// The gradient-flow widget's browser front-end (issue 17): two log-scale line charts in SVG,
// activation std and gradient norm ||dL/dh_i|| per layer, with the previous setting as a grey
// dashed line. Plain DOM + SVG, nothing fetched; no imports: web/common.js comes first (nlNode,
// nlHtml, nlMount, nlLegend, nlRoundTrip; see web_host.esm_text). Same module in JupyterLab (source
// "live": the kernel computes `data`) and in the book / slides (source "grid": a model shim looks
// `data` up in a precomputed grid). It uses only model.get / set / save_changes / on / off.
//
// data   {act: [std per layer], grad: [||dL/dh_i|| per layer], caption: "..."}
// spec   {controls: [{name, label, kind: "select"|"range", options | min/max/step, grid_values?}],
//         titles: {act, grad}, xlabel, legend: {current, previous}, grid_note}
//
// The DOM is built once; an update sets path "d" attributes, moves pooled tick elements and
// changes a few texts, so it fits in one frame. The current curves carry data-last-act /
// data-last-grad (the last layer's value, as in `data`) for the browser tests, and
// el.dataset.lastUpdateMs is the time from the input event to the next animation frame after the
// redraw (tools/bench_gradflow.py reads it).

// one chart, in CSS pixels (no scaling: fonts stay >= 14px); two side by side need 2 W + 16 px: 888 px, inside
// the 912 px a widget gets in JupyterLab at 1366 x 768 with its file browser open (470 wrapped the gradient
// chart below the fold there, issue 36)
const W = 436, H = 310;
const M = { left: 66, right: 14, top: 34, bottom: 54 };  // plot-area margins
const PW = W - M.left - M.right, PH = H - M.top - M.bottom;
const Y_TICKS = 16, X_TICKS = 20;                        // pooled tick elements per chart
const MARKERS_UP_TO = 64;                                // dots on the current curve up to this depth
const SUP = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };

// --- numbers -> pixels and tick labels --------------------------------------------------------------

function plainLabel(v) {                                 // like "%g" with 3 significant digits
  const r = Number(v.toPrecision(3));
  if (r !== 0 && (Math.abs(r) < 1e-4 || Math.abs(r) >= 1e6)) return r.toExponential().replace("e+", "e");
  return String(r);
}
const powerLabel = (e) => (e === 0 ? "1" : e === 1 ? "10" : "10" + String(e).split("").map((c) => SUP[c]).join(""));

function logTicks(lo, hi) {
  const a = Math.log10(lo), b = Math.log10(hi), ticks = [];
  if (hi / lo < 300) {                                   // narrow range: 1-2-5 ticks as plain numbers
    for (let e = Math.floor(a); e <= Math.ceil(b); e++) {
      for (const m of [1, 2, 5]) {
        const v = m * Math.pow(10, e);
        if (v >= lo && v <= hi) ticks.push([v, plainLabel(v)]);
      }
    }
    return ticks;
  }
  const e0 = Math.ceil(a), e1 = Math.floor(b);           // wide range: powers of ten, at most ~8 labels
  const step = Math.max(1, Math.ceil((e1 - e0 + 1) / 8));
  for (let e = e0; e <= e1; e += step) ticks.push([Math.pow(10, e), powerLabel(e)]);
  return ticks;
}

function xStep(n) {
  for (const s of [1, 2, 5, 10, 20, 25, 50]) if (n / s <= 10) return s;
  return 100;
}

const positive = (v) => typeof v === "number" && v > 0 && Number.isFinite(v);

// --- one chart: built once, updated in place --------------------------------------------------------

function makeChart(parent, kind, title, xlabel, uid) {
  const svg = nlNode("svg", { class: `nl-gf-chart nl-gf-${kind}`, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
                            role: "img", "aria-label": title });
  parent.appendChild(svg);
  nlNode("text", { class: "nl-gf-title", x: M.left + PW / 2, y: 22, "text-anchor": "middle", text: title }, svg);
  nlNode("text", { class: "nl-gf-xlabel", x: M.left + PW / 2, y: H - 8, "text-anchor": "middle", text: xlabel }, svg);
  const clipId = `${uid}-clip-${kind}`, markerId = `${uid}-dot-${kind}`;
  const defs = nlNode("defs", {}, svg);
  nlNode("rect", { x: M.left - 6, y: M.top - 6, width: PW + 12, height: PH + 12 }, nlNode("clipPath", { id: clipId }, defs));
  const marker = nlNode("marker", { id: markerId, markerWidth: 8, markerHeight: 8, refX: 4, refY: 4,
                                  markerUnits: "userSpaceOnUse" }, defs);
  nlNode("circle", { cx: 4, cy: 4, r: 2.8, class: "nl-gf-dot" }, marker);
  const grid = nlNode("g", { class: "nl-gf-ticks" }, svg);
  const yTicks = [], xTicks = [];
  for (let i = 0; i < Y_TICKS; i++) {
    const g = nlNode("g", { display: "none" }, grid);
    yTicks.push({ g, line: nlNode("line", { x1: M.left, x2: M.left + PW, class: "nl-gf-grid" }, g),
                  text: nlNode("text", { x: M.left - 6, "text-anchor": "end", "dominant-baseline": "middle",
                                       class: "nl-gf-ticklabel" }, g) });
  }
  for (let i = 0; i < X_TICKS; i++) {
    const g = nlNode("g", { display: "none" }, grid);
    xTicks.push({ g, line: nlNode("line", { y1: M.top, y2: M.top + PH, class: "nl-gf-grid" }, g),
                  text: nlNode("text", { y: M.top + PH + 20, "text-anchor": "middle", class: "nl-gf-ticklabel" }, g) });
  }
  nlNode("rect", { class: "nl-gf-frame", x: M.left, y: M.top, width: PW, height: PH }, svg);
  const curves = nlNode("g", { "clip-path": `url(#${clipId})` }, svg);
  const prev = nlNode("path", { class: "nl-gf-prev", "data-kind": kind, "data-role": "previous" }, curves);
  const cur = nlNode("path", { class: "nl-gf-curve", "data-kind": kind, "data-role": "current" }, curves);
  return { svg, yTicks, xTicks, prev, cur, markerId };
}

function pathOf(values, x, y) {                          // a break where a value is not positive (log axis)
  let d = "", pen = false;
  values.forEach((v, i) => {
    if (!positive(v)) { pen = false; return; }
    d += `${pen ? "L" : "M"}${x(i + 1).toFixed(1)},${y(v).toFixed(1)}`;
    pen = true;
  });
  return d;
}

function drawChart(chart, kind, values, previous) {
  const all = values.concat(previous || []).filter(positive);
  let lo = all.length ? Math.min(...all) : 1, hi = all.length ? Math.max(...all) : 1;
  lo /= 2; hi *= 2;                                      // a factor 2 margin on the log axis
  const n = Math.max(values.length, previous ? previous.length : 0, 1);
  const la = Math.log10(lo), lb = Math.log10(hi);
  const x = (i) => M.left + ((i - 0.5) / n) * PW;        // layers 1..n in [0.5, n + 0.5]
  const y = (v) => M.top + ((lb - Math.log10(v)) / (lb - la)) * PH;

  const yt = logTicks(lo, hi);
  chart.yTicks.forEach((t, i) => {
    if (i >= yt.length) { t.g.setAttribute("display", "none"); return; }
    const py = y(yt[i][0]).toFixed(1);
    t.line.setAttribute("y1", py); t.line.setAttribute("y2", py);
    t.text.setAttribute("y", py); t.text.textContent = yt[i][1];
    t.g.removeAttribute("display");
  });
  const step = xStep(n), xs = [];
  if (step > 1) xs.push(1);
  for (let v = step; v <= n; v += step) xs.push(v);
  chart.xTicks.forEach((t, i) => {
    if (i >= xs.length) { t.g.setAttribute("display", "none"); return; }
    const px = x(xs[i]).toFixed(1);
    t.line.setAttribute("x1", px); t.line.setAttribute("x2", px);
    t.text.setAttribute("x", px); t.text.textContent = String(xs[i]);
    t.g.removeAttribute("display");
  });

  chart.prev.setAttribute("d", previous ? pathOf(previous, x, y) : "");
  chart.cur.setAttribute("d", pathOf(values, x, y));
  const dots = values.length <= MARKERS_UP_TO ? `url(#${chart.markerId})` : "none";
  for (const m of ["marker-start", "marker-mid", "marker-end"]) chart.cur.setAttribute(m, dots);
  const last = values.length ? values[values.length - 1] : null;
  chart.cur.setAttribute(`data-last-${kind}`, last === null ? "" : String(last));
  chart.cur.setAttribute("data-n", String(values.length));
}

// --- controls -------------------------------------------------------------------------------------

function makeControl(parent, c, source, initial, onInput) {
  const id = `${parent.dataset.uid}-${c.name}`;
  const wrap = nlHtml("div", { class: "nl-gf-control" }, parent);
  nlHtml("label", { for: id, text: c.label }, wrap);
  // On the static page only the grid's values exist (spec: grid_values; the initial value is in the grid too).
  const gridValues = source === "grid" && Array.isArray(c.grid_values)
    ? Array.from(new Set([...c.grid_values, initial])).filter((v) => v !== undefined) : null;
  if (c.kind === "range") {
    const input = nlHtml("input", { id, name: c.name, type: "range", "data-control": c.name }, wrap);
    const out = nlHtml("output", { for: id, class: "nl-gf-value" }, wrap);
    input.min = c.min; input.max = c.max; input.step = c.step || 1;
    const values = gridValues ? gridValues.sort((a, b) => a - b) : null;
    const nearest = (v) => values.reduce((best, g) => (Math.abs(g - v) < Math.abs(best - v) ? g : best), values[0]);
    let shownValue = initial;
    const show = (v) => {
      shownValue = v;
      input.value = String(v);
      out.textContent = String(v);
      input.setAttribute("aria-valuetext", String(v));
    };
    show(initial);
    const commit = (v) => { const changed = v !== shownValue; show(v); if (changed) onInput(c.name, v); };
    // dragging or a typed value: the nearest grid value (the thumb jumps between them)
    input.addEventListener("input", () => commit(values ? nearest(Number(input.value)) : Number(input.value)));
    if (values) {                   // arrow keys: the next / previous grid value, not +-1
      input.addEventListener("keydown", (ev) => {
        const dir = { ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1 }[ev.key];
        if (!dir) return;
        ev.preventDefault();
        const i = values.indexOf(nearest(shownValue)) + dir;
        if (i >= 0 && i < values.length) commit(values[i]);
      });
    }
    return { show };
  }
  const select = nlHtml("select", { id, name: c.name, "data-control": c.name }, wrap);
  const byText = new Map();
  for (const [value, label] of c.options) {
    const outside = gridValues && !gridValues.includes(value);   // shown, but not selectable: not in the grid
    const opt = nlHtml("option", { value: String(value), text: outside ? `${label}（网格外 not in grid）` : String(label) }, select);
    if (outside) opt.disabled = true;
    byText.set(String(value), value);
  }
  const show = (v) => { select.value = String(v); };
  show(initial);
  select.addEventListener("change", () => { if (byText.has(select.value)) onInput(c.name, byText.get(select.value)); });
  return { show };
}

// --- the widget -----------------------------------------------------------------------------------

function render({ model, el }) {
  const { spec, source, uid, root } = nlMount(model, el, "nl-gradflow", "nl-gf");
  root.dataset.uid = uid;

  const controlsBox = nlHtml("div", { class: "nl-gf-controls" }, root);
  controlsBox.dataset.uid = uid;
  const initial = model.get("controls") || {};
  const shown = {};
  const onInput = (name, value) => trip.input({ [name]: value });
  for (const c of spec.controls || []) {
    shown[c.name] = makeControl(controlsBox, c, source, initial[c.name], onInput);
  }
  const showError = nlErrorLine(root, "nl-gf");
  const caption = nlHtml("div", { class: "nl-gf-caption", "aria-live": "polite" }, root);

  const charts = nlHtml("div", { class: "nl-gf-charts" }, root);
  const titles = spec.titles || {};
  const xlabel = spec.xlabel || "层 layer i";
  const act = makeChart(charts, "act", titles.act || "激活的标准差 activation std", xlabel, uid);
  const grad = makeChart(charts, "grad", titles.grad || "梯度范数 ||∂L/∂h_i||", xlabel, uid);

  const legendText = spec.legend || { current: "当前 current", previous: "上一个设置 previous" };
  nlLegend(root, "nl-gf", [["nl-gf-curve", legendText.current], ["nl-gf-prev", legendText.previous]]);

  function redraw(current, previous) {
    const t = performance.now();
    const d = current || {};
    const p = previous || {};
    drawChart(act, "act", d.act || [], p.act || null);
    drawChart(grad, "grad", d.grad || [], p.grad || null);
    caption.textContent = d.caption || "";
    el.dataset.redrawMs = (performance.now() - t).toFixed(2);
  }
  const trip = nlRoundTrip(model, el, { live: source === "live", shown,
                                        on: { data: nlKeepPrevious(redraw), error: showError } });
  return () => trip.dispose(root);
}

export default { render };
