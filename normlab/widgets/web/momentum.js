// The momentum widget's browser front-end (lesson 02): one slider m, one SVG line chart per
// convention of the running-average update, side by side, each the running mean over the steps with
// the true mean as a horizontal line and the previous setting as a grey dashed line. Plain DOM + SVG,
// nothing fetched; no imports: web/common.js comes first (nlNode, nlHtml, nlMount, nlLegend,
// nlRoundTrip; see web_host.esm_text). Same module in JupyterLab (source "live": the kernel computes `data`)
// and in the book / slides (source "grid": a model shim looks `data` up in a precomputed grid). It
// uses only model.get / set / save_changes / on / off.
//
// data   {m, panels: [{convention, trace: [running_mean after step 1..steps]}], caption}
// spec   {controls: [{name: "m100", label, kind: "range", min, max, step, scale, digits}],
//         panels: [{convention, title, rule}], steps, true_mean, y_range, xlabel, ylabel,
//         true_label, legend: {current, previous}, grid_note}
//
// The DOM is built once; an update sets path "d" attributes and a few texts. For the tests each
// current curve carries data-convention, data-last (the last value, as in `data`) and data-n, and
// each chart's <svg> the mapping of values to pixels (data-y-lo, data-y-hi, data-top, data-height).

// One chart is drawn at the width it gets (no scaling: fonts stay >= 14px): the charts sit side by side
// when the widget is at least two W_MIN wide (JupyterLab, the book at 1366 px and up), else stacked
// (a narrow window). A ResizeObserver redraws them when the width changes; the charts' box carries
// data-cols (1 or 2) and data-chart-width for the tests.
const W_MAX = 470, W_MIN = 340, W_FLOOR = 300, H = 320, GAP = 16;
const M = { left: 58, right: 14, top: 62, bottom: 50 };  // plot-area margins (title and rule above)
const TITLE_LINE = 20;                                     // a title too long for the chart wraps to two lines

function geometry(w, twoLines) {
  const top = M.top + (twoLines ? TITLE_LINE : 0);
  return { w, top, pw: w - M.left - M.right, ph: H - top - M.bottom };
}

function layout(avail, n) {                                // -> {cols, w}
  if (!(avail > 0)) return { cols: n, w: W_MAX };          // not in the page yet: the first measure redraws
  const cols = n > 1 && avail >= n * W_MIN + (n - 1) * GAP ? n : 1;
  const w = Math.floor((avail - (cols - 1) * GAP) / cols);
  return { cols, w: Math.max(W_FLOOR, Math.min(W_MAX, w)) };
}

function niceStep(span, target) {                        // 1-2-5 steps, about `target` ticks
  const raw = span / Math.max(target, 1), p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}
const tickLabel = (v) => String(Number(v.toPrecision(6)));

// --- one chart: built once, updated in place --------------------------------------------------------

function makeChart(parent, panel, spec, uid, index, w, wrap = false) {
  const svg = nlNode("svg", { class: "nl-mo-chart", width: w, height: H, viewBox: `0 0 ${w} ${H}`, role: "img",
                            "aria-label": `${panel.title}: ${spec.ylabel || "running_mean"}`,
                            "data-convention": panel.convention }, parent);
  const mid = M.left + (w - M.left - M.right) / 2;
  const title = nlNode("text", { class: "nl-mo-title", x: mid, y: 20, "text-anchor": "middle", text: panel.title }, svg);
  let twoLines = false;
  const cut = panel.title.indexOf(" (");
  if (cut > 0 && (wrap || (title.getComputedTextLength && title.getComputedTextLength() > w - 8))) {
    twoLines = true;                                       // "中文 (English)" on two lines
    title.textContent = "";
    nlNode("tspan", { x: mid, text: panel.title.slice(0, cut) }, title);
    nlNode("tspan", { x: mid, dy: TITLE_LINE, class: "nl-mo-title-en", text: panel.title.slice(cut + 1) }, title);
  }
  const g = geometry(w, twoLines);
  const rule = nlNode("text", { class: "nl-mo-rule", x: mid, y: g.top - 20, "text-anchor": "middle",
                                text: panel.rule || "" }, svg);
  const ruleLength = rule.getComputedTextLength ? rule.getComputedTextLength() : 0;
  if (ruleLength)                                          // a long rule moves off the plot's centre, within the chart
    rule.setAttribute("x", String(Math.max(ruleLength / 2 + 4, Math.min(mid, w - ruleLength / 2 - 4))));
  nlNode("text", { class: "nl-mo-xlabel", x: mid, y: H - 8, "text-anchor": "middle",
                 text: spec.xlabel || "训练步 step" }, svg);
  nlNode("text", { class: "nl-mo-ylabel", x: 0, y: 0, "text-anchor": "middle",
                 transform: `translate(19,${g.top + g.ph / 2}) rotate(-90)`, text: spec.ylabel || "running_mean" }, svg);
  const clipId = `${uid}-clip-${index}`;
  nlNode("rect", { x: M.left, y: g.top - 2, width: g.pw, height: g.ph + 4 },
       nlNode("clipPath", { id: clipId }, nlNode("defs", {}, svg)));
  const ticks = nlNode("g", { class: "nl-mo-ticks" }, svg);
  nlNode("rect", { class: "nl-mo-frame", x: M.left, y: g.top, width: g.pw, height: g.ph }, svg);
  const lines = nlNode("g", { "clip-path": `url(#${clipId})` }, svg);
  const truth = nlNode("line", { class: "nl-mo-true", x1: M.left, x2: M.left + g.pw }, lines);
  const prev = nlNode("path", { class: "nl-mo-prev", "data-role": "previous", "data-convention": panel.convention }, lines);
  const cur = nlNode("path", { class: "nl-mo-curve", "data-role": "current", "data-convention": panel.convention }, lines);
  const end = nlNode("circle", { class: "nl-mo-dot", r: 4 }, lines);
  // the true mean's value on the y axis, left of the plot (never over a trace); the legend names the line
  const trueText = nlNode("text", { class: "nl-mo-truelabel", x: M.left - 6, "text-anchor": "end",
                                    "dominant-baseline": "middle" }, svg);
  const lastText = nlNode("text", { class: "nl-mo-last", x: M.left + g.pw - 4, "text-anchor": "end" }, svg);
  return { svg, ticks, truth, prev, cur, end, trueText, lastText, panel, g, twoLines };
}

function drawChart(chart, spec, trace, previous, m) {
  const steps = spec.steps || trace.length || 1;
  const finite = trace.concat(previous || []).filter((v) => typeof v === "number" && Number.isFinite(v));
  let [lo, hi] = spec.y_range || (finite.length ? [Math.min(...finite), Math.max(...finite)] : [0, 1]);
  if (finite.length) { lo = Math.min(lo, ...finite); hi = Math.max(hi, ...finite); }   // never clip a curve
  if (!(hi > lo)) { lo -= 1; hi += 1; }
  const { top, pw: PW, ph: PH } = chart.g;
  const x = (i) => M.left + ((i - 0.5) / steps) * PW;    // steps 1..n in [0.5, n + 0.5]
  const y = (v) => top + ((hi - v) / (hi - lo)) * PH;
  chart.svg.dataset.yLo = String(lo); chart.svg.dataset.yHi = String(hi);
  chart.svg.dataset.top = String(top); chart.svg.dataset.height = String(PH);

  // ticks: rebuilt (a dozen elements; the range changes only when a curve leaves spec.y_range)
  const key = `${lo}|${hi}|${steps}|${PW}|${top}`;
  if (chart.ticks.dataset.key !== key) {
    chart.ticks.dataset.key = key;
    chart.ticks.textContent = "";
    const ys = niceStep(hi - lo, 6);
    for (let v = Math.ceil(lo / ys) * ys; v <= hi + 1e-9; v += ys) {
      const py = y(v).toFixed(1);
      nlNode("line", { x1: M.left, x2: M.left + PW, y1: py, y2: py, class: "nl-mo-grid" }, chart.ticks);
      nlNode("text", { x: M.left - 6, y: py, "text-anchor": "end", "dominant-baseline": "middle",
                     class: "nl-mo-ticklabel", text: tickLabel(v) }, chart.ticks);
    }
    const xs = niceStep(steps, 6);
    for (const v of [1].concat(Array.from({ length: Math.floor(steps / xs) }, (_, i) => (i + 1) * xs))) {
      const px = x(v).toFixed(1);
      nlNode("line", { y1: top, y2: top + PH, x1: px, x2: px, class: "nl-mo-grid" }, chart.ticks);
      nlNode("text", { x: px, y: top + PH + 20, "text-anchor": "middle", class: "nl-mo-ticklabel",
                     text: String(v) }, chart.ticks);
    }
  }
  const path = (vals) => vals.map((v, i) => `${i ? "L" : "M"}${x(i + 1).toFixed(2)},${y(v).toFixed(2)}`).join("");
  const ty = y(spec.true_mean).toFixed(1);
  chart.truth.setAttribute("y1", ty); chart.truth.setAttribute("y2", ty);
  chart.trueText.setAttribute("y", ty);
  chart.trueText.textContent = tickLabel(Number(spec.true_mean));
  chart.prev.setAttribute("d", previous ? path(previous) : "");
  chart.cur.setAttribute("d", path(trace));
  const last = trace.length ? trace[trace.length - 1] : null;
  chart.cur.dataset.last = last === null ? "" : String(last);
  chart.cur.dataset.n = String(trace.length);
  if (last !== null) {
    chart.end.setAttribute("cx", x(trace.length).toFixed(2));
    chart.end.setAttribute("cy", y(last).toFixed(2));
  }
  // the step-n value, above or below the true-mean line (away from the curve's end)
  const below = last !== null && last > spec.true_mean - (hi - lo) * 0.12;
  chart.lastText.setAttribute("y", (below ? top + PH - 10 : top + 18).toFixed(1));
  chart.lastText.textContent = last === null ? "" : `m = ${m.toFixed(2)}：第 ${trace.length} 步 ${last.toFixed(2)}`;
}

// --- the slider -----------------------------------------------------------------------------------

function makeSlider(parent, c, uid, initial, onInput) {
  const id = `${uid}-${c.name}`;
  const scale = c.scale || 1, digits = c.digits || 0;
  const wrap = nlHtml("div", { class: "nl-mo-control" }, parent);
  nlHtml("label", { for: id, text: c.label }, wrap);
  const input = nlHtml("input", { id, name: c.name, type: "range", "data-control": c.name }, wrap);
  input.min = c.min; input.max = c.max; input.step = c.step || 1;
  const out = nlHtml("output", { for: id, class: "nl-mo-value" }, wrap);
  let shownValue = initial;
  const show = (v) => {
    shownValue = v;
    input.value = String(v);
    const text = (v / scale).toFixed(digits);
    out.textContent = text;
    input.setAttribute("aria-valuetext", `m = ${text}`);
  };
  show(initial);
  input.addEventListener("input", () => {
    const v = Math.round(Number(input.value));
    if (v === shownValue) return;
    show(v);
    onInput(c.name, v);
  });
  return { show };
}

// --- the widget -----------------------------------------------------------------------------------

function render({ model, el }) {
  const { spec, source, uid, root } = nlMount(model, el, "nl-momentum", "nl-mo");

  const controlsBox = nlHtml("div", { class: "nl-mo-controls" }, root);
  const initial = model.get("controls") || {};
  const shown = {};
  const onInput = (name, value) => trip.input({ [name]: value });
  for (const c of spec.controls || []) shown[c.name] = makeSlider(controlsBox, c, uid, initial[c.name], onInput);
  const showError = nlErrorLine(root, "nl-mo");
  const caption = nlHtml("div", { class: "nl-mo-caption", "aria-live": "polite" }, root);

  const chartsBox = nlHtml("div", { class: "nl-mo-charts" }, root);
  const panels = spec.panels || [];
  let charts = [], shape = "";
  let lastDrawn = [null, null];
  function build() {                                     // the charts at the width the box has now
    const { cols, w } = layout(chartsBox.clientWidth, panels.length);
    if (`${cols}|${w}` === shape) return false;
    shape = `${cols}|${w}`;
    chartsBox.textContent = "";
    chartsBox.dataset.cols = String(cols);
    chartsBox.dataset.chartWidth = String(w);
    charts = panels.map((p, i) => makeChart(chartsBox, p, spec, uid, i, w));
    if (charts.some((c) => c.twoLines) && !charts.every((c) => c.twoLines)) {   // side by side: plots aligned
      chartsBox.textContent = "";
      charts = panels.map((p, i) => makeChart(chartsBox, p, spec, uid, i, w, true));
    }
    return true;
  }
  build();
  const resized = typeof ResizeObserver === "function"
    ? new ResizeObserver(() => { if (build() && lastDrawn[0]) redraw(...lastDrawn); }) : null;
  if (resized) resized.observe(chartsBox);

  const legendText = spec.legend || { current: "当前 current", previous: "上一个设置 previous" };
  nlLegend(root, "nl-mo", [["nl-mo-curve", legendText.current], ["nl-mo-prev", legendText.previous],
                           ["nl-mo-true", spec.true_label || ""]]);

  function redraw(current, previous) {
    lastDrawn = [current, previous];
    const d = current || {}, p = previous || {};
    const byConv = (data) => new Map((data.panels || []).map((q) => [q.convention, q.trace || []]));
    const now = byConv(d), before = byConv(p);
    charts.forEach((chart) => drawChart(chart, spec, now.get(chart.panel.convention) || [],
                                        before.get(chart.panel.convention) || null, Number(d.m) || 0));
    caption.textContent = d.caption || "";
  }
  const trip = nlRoundTrip(model, el, { live: source === "live", shown,
                                        on: { data: nlKeepPrevious(redraw), error: showError } });
  return () => { if (resized) resized.disconnect(); trip.dispose(root); };
}

export default { render };
