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

const W = 470, H = 320;                                  // one chart, in CSS pixels (no scaling: fonts stay >= 14px)
const M = { left: 58, right: 14, top: 62, bottom: 50 };  // plot-area margins (title and rule above)
const PW = W - M.left - M.right, PH = H - M.top - M.bottom;

function niceStep(span, target) {                        // 1-2-5 steps, about `target` ticks
  const raw = span / Math.max(target, 1), p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}
const tickLabel = (v) => String(Number(v.toPrecision(6)));

// --- one chart: built once, updated in place --------------------------------------------------------

function makeChart(parent, panel, spec, uid, index) {
  const svg = nlNode("svg", { class: "nl-mo-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
                            "aria-label": `${panel.title}: ${spec.ylabel || "running_mean"}`,
                            "data-convention": panel.convention }, parent);
  nlNode("text", { class: "nl-mo-title", x: M.left + PW / 2, y: 20, "text-anchor": "middle",
                               text: panel.title }, svg);
  nlNode("text", { class: "nl-mo-rule", x: M.left + PW / 2, y: 42, "text-anchor": "middle", text: panel.rule || "" }, svg);
  nlNode("text", { class: "nl-mo-xlabel", x: M.left + PW / 2, y: H - 8, "text-anchor": "middle",
                 text: spec.xlabel || "训练步 step" }, svg);
  nlNode("text", { class: "nl-mo-ylabel", x: 0, y: 0, "text-anchor": "middle",
                 transform: `translate(15,${M.top + PH / 2}) rotate(-90)`, text: spec.ylabel || "running_mean" }, svg);
  const clipId = `${uid}-clip-${index}`;
  nlNode("rect", { x: M.left, y: M.top - 2, width: PW, height: PH + 4 },
       nlNode("clipPath", { id: clipId }, nlNode("defs", {}, svg)));
  const ticks = nlNode("g", { class: "nl-mo-ticks" }, svg);
  nlNode("rect", { class: "nl-mo-frame", x: M.left, y: M.top, width: PW, height: PH }, svg);
  const lines = nlNode("g", { "clip-path": `url(#${clipId})` }, svg);
  const truth = nlNode("line", { class: "nl-mo-true", x1: M.left, x2: M.left + PW }, lines);
  const prev = nlNode("path", { class: "nl-mo-prev", "data-role": "previous", "data-convention": panel.convention }, lines);
  const cur = nlNode("path", { class: "nl-mo-curve", "data-role": "current", "data-convention": panel.convention }, lines);
  const end = nlNode("circle", { class: "nl-mo-dot", r: 4 }, lines);
  const trueText = nlNode("text", { class: "nl-mo-truelabel", x: M.left + 6, "text-anchor": "start" }, svg);
  const lastText = nlNode("text", { class: "nl-mo-last", x: M.left + PW - 4, "text-anchor": "end" }, svg);
  return { svg, ticks, truth, prev, cur, end, trueText, lastText, panel };
}

function drawChart(chart, spec, trace, previous, m) {
  const steps = spec.steps || trace.length || 1;
  const finite = trace.concat(previous || []).filter((v) => typeof v === "number" && Number.isFinite(v));
  let [lo, hi] = spec.y_range || (finite.length ? [Math.min(...finite), Math.max(...finite)] : [0, 1]);
  if (finite.length) { lo = Math.min(lo, ...finite); hi = Math.max(hi, ...finite); }   // never clip a curve
  if (!(hi > lo)) { lo -= 1; hi += 1; }
  const x = (i) => M.left + ((i - 0.5) / steps) * PW;    // steps 1..n in [0.5, n + 0.5]
  const y = (v) => M.top + ((hi - v) / (hi - lo)) * PH;
  chart.svg.dataset.yLo = String(lo); chart.svg.dataset.yHi = String(hi);
  chart.svg.dataset.top = String(M.top); chart.svg.dataset.height = String(PH);

  // ticks: rebuilt (a dozen elements; the range changes only when a curve leaves spec.y_range)
  const key = `${lo}|${hi}|${steps}`;
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
      nlNode("line", { y1: M.top, y2: M.top + PH, x1: px, x2: px, class: "nl-mo-grid" }, chart.ticks);
      nlNode("text", { x: px, y: M.top + PH + 20, "text-anchor": "middle", class: "nl-mo-ticklabel",
                     text: String(v) }, chart.ticks);
    }
  }
  const path = (vals) => vals.map((v, i) => `${i ? "L" : "M"}${x(i + 1).toFixed(2)},${y(v).toFixed(2)}`).join("");
  const ty = y(spec.true_mean).toFixed(1);
  chart.truth.setAttribute("y1", ty); chart.truth.setAttribute("y2", ty);
  chart.trueText.setAttribute("y", (Number(ty) - 6).toFixed(1));
  chart.trueText.textContent = spec.true_label || "";
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
  chart.lastText.setAttribute("y", (below ? M.top + PH - 10 : M.top + 18).toFixed(1));
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
  const charts = (spec.panels || []).map((p, i) => makeChart(chartsBox, p, spec, uid, i));

  const legendText = spec.legend || { current: "当前 current", previous: "上一个设置 previous" };
  nlLegend(root, "nl-mo", [["nl-mo-curve", legendText.current], ["nl-mo-prev", legendText.previous],
                           ["nl-mo-true", spec.true_label || ""]]);

  function redraw(current, previous) {
    const d = current || {}, p = previous || {};
    const byConv = (data) => new Map((data.panels || []).map((q) => [q.convention, q.trace || []]));
    const now = byConv(d), before = byConv(p);
    charts.forEach((chart) => drawChart(chart, spec, now.get(chart.panel.convention) || [],
                                        before.get(chart.panel.convention) || null, Number(d.m) || 0));
    caption.textContent = d.caption || "";
  }
  const trip = nlRoundTrip(model, el, { live: source === "live", shown,
                                        on: { data: nlKeepPrevious(redraw), error: showError } });
  return () => trip.dispose(root);
}

export default { render };
