// The class service in the browser (issue 39): the class's bars under a prompt, the teacher's reveal.
// An ES module served by the service (SERVICE_PREFIX/static/classroom.js). It needs the page's session,
// which the classic script SERVICE_PREFIX/api/session.js writes to window.normlabClassroom (a classic
// script may read the service's cookie without an XSRF header; fetch() calls then send the XSRF token).
//
// On the teacher's deck (a reveal.js page, served by the service at SERVICE_PREFIX/deck/NN_name.slides.html):
// each prompt's slide gets the class's distribution, polled every POLL_MS, and a reveal button; the reveal
// is stored by the service and dispatched on the deck as a `normlab:reveal` event (detail {lesson, id}).
// On a learner's page (JupyterLab, the book): after a `normlab:guess` event (detail {lesson, id, choice},
// dispatched by the prompt widget, web/predict.js) the class's bars appear under that prompt; reveals the
// teacher made are dispatched as `normlab:reveal` on document (the prompt widget opens its answer fold).

const POLL_MS = 500;          // the teacher's bars: "updates within a second"
const REVEALS_MS = 2000;      // a learner's page asks which answers the teacher revealed
const GUESS_EVENT = "normlab:guess", REVEAL_EVENT = "normlab:reveal";
const PROMPT = ".nl-pr-ask[data-key]";
const HEAD = "全班的预测 (the class's guesses)";     // a prompt's choice widget (web/predict.js): data-key "LL.id"

export function session() {
  return window.normlabClassroom || null;
}

async function call(info, method, path, body) {
  const r = await fetch(info.base + path, {
    method, credentials: "same-origin",
    headers: { "X-XSRFToken": info.xsrf, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  let data = null;
  try { data = await r.json(); } catch (e) { /* not JSON */ }
  return { status: r.status, data };
}

function el(tag, attrs, parent) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  if (parent) parent.appendChild(node);
  return node;
}

function ensureStyle() {
  if (document.getElementById("nl-cr-style")) return;
  el("style", { id: "nl-cr-style", text: `
.nl-cr{font-size:18px;line-height:1.3;margin:.4em 0;padding:.4em .6em;border:1px solid #c9d3e0;border-radius:6px;background:#f7f9fc;color:#222;text-align:left}
.nl-cr-row{display:grid;grid-template-columns:2.2em 1fr 3.2em;align-items:center;gap:.4em;margin:.15em 0}
.nl-cr-bar{height:1em;background:#4a78c2;border-radius:3px;transition:width .3s}
.nl-cr-row.nl-cr-answer .nl-cr-bar{background:#2e7d32}
.nl-cr-head{font-weight:600;margin-bottom:.2em}.nl-cr-n{color:#555}
.nl-cr button{font:inherit;margin-top:.3em;padding:.15em .6em}` }, document.head);
}

// The class's distribution of lesson.id in `holder`, polled until stop() (returned) is called.
// `conceal`: only "n / N guessed" until the teacher shows the bars (a projected histogram sways the
// votes still coming in: the instructor guide's 课堂投票 section).
export function pollBars(holder, lesson, id, { teacher = false, interval = POLL_MS, conceal = false } = {}) {
  const info = session();
  ensureStyle();
  const box = el("div", { class: "nl-cr", "data-prompt": `${lesson}.${id}`, "aria-live": "polite" }, holder);
  const head = el("div", { class: "nl-cr-head", text: HEAD }, box);
  const rows = el("div", {}, box);
  const n = el("div", { class: "nl-cr-n" }, box);
  let timer = null, stopped = false;
  rows.hidden = conceal;
  if (conceal) {
    const show = el("button", { type: "button", class: "nl-cr-show", text: "显示分布 (show the bars)" }, box);
    show.addEventListener("click", () => { rows.hidden = !rows.hidden;
      show.textContent = rows.hidden ? "显示分布 (show the bars)" : "隐藏分布 (hide the bars)"; });
  }
  let button = null;                                    // the teacher's reveal: once, then it says so
  if (teacher) {
    button = el("button", { type: "button", class: "nl-cr-reveal", text: "公布答案 (reveal)" }, box);
    button.addEventListener("click", async () => {
      const r = await call(info, "POST", "api/reveal", { lesson, id });
      if (r.status === 200) {
        draw(r.data);
        document.dispatchEvent(new CustomEvent(REVEAL_EVENT, { bubbles: true, detail: { lesson, id } }));
      }
    });
  }
  function draw(p) {
    rows.textContent = "";
    const most = Math.max(1, ...Object.values(p.counts));
    p.options.forEach((text, i) => {
      const key = Object.keys(p.counts)[i];
      const right = p.revealed && p.answer === key;      // a projected deck never shows the answer before the reveal
      const row = el("div", { class: "nl-cr-row" + (right ? " nl-cr-answer" : ""), "data-key": key, title: text }, rows);
      el("span", { text: `(${key})` }, row);
      el("div", { class: "nl-cr-bar", style: `width:${(100 * p.counts[key] / most).toFixed(1)}%` }, row);
      el("span", { class: "nl-cr-count", text: String(p.counts[key]) }, row);
    });
    n.textContent = `${p.n} / ${p.N} 人已预测 (guessed / logged in)` + (p.revealed ? " · 答案已公布 (revealed)" : "");
    if (button && p.revealed) { button.disabled = true; button.textContent = "答案已公布 (revealed)"; }
    box.dataset.n = String(p.n);
  }
  async function tick() {
    if (stopped) return;
    try {
      const r = await call(info, "GET", `api/poll/${lesson}/${id}`);
      if (r.status === 200) { head.textContent = HEAD; draw(r.data); }
      else head.textContent = (r.data && r.data.error) || `HTTP ${r.status}`;
    } catch (e) { /* the service is away: try again */ }
    if (!stopped && interval) timer = setTimeout(tick, interval);
  }
  tick();
  return () => { stopped = true; clearTimeout(timer); box.remove(); };
}

function promptKey(node) {
  const k = node && node.dataset ? node.dataset.key : "";
  return k && k.includes(".") ? k.split(".", 2) : null;
}

// The teacher's deck: bars (concealed until shown) and a reveal button under every prompt widget
// (PROMPT; the deck's widgets render after load, so new ones are watched for).
export function attachDeck() {
  const done = new Map();
  const scan = () => {
    for (const node of document.querySelectorAll(PROMPT)) {
      const key = promptKey(node);
      if (key && !done.has(node)) done.set(node, pollBars(node.parentElement, key[0], key[1], { teacher: true, conceal: true }));
    }
  };
  scan();
  const watch = new MutationObserver(scan);
  watch.observe(document.body, { childList: true, subtree: true });
  return () => { watch.disconnect(); done.forEach((stop) => stop()); };
}

// A learner's page: bars after their guess; the teacher's reveals as events.
export function attachLearner() {
  const shown = new Map(), revealed = new Set(), lessons = new Set();
  const scan = () => {          // the lessons of the prompts on the page (widgets, or bars already shown)
    for (const node of document.querySelectorAll(`${PROMPT}, [data-prompt]`)) {
      const k = promptKey(node) || (node.dataset.prompt || "").split(".", 2);
      if (k && k.length === 2 && k[0]) lessons.add(k[0]);
    }
  };
  document.addEventListener(GUESS_EVENT, (event) => {
    const { lesson, id } = event.detail || {};
    if (!lesson || !id) return;
    lessons.add(lesson);
    const key = `${lesson}.${id}`;
    const target = (event.target instanceof Element && event.target.closest(PROMPT)) ||
      document.querySelector(`.nl-pr-ask[data-key="${CSS.escape(key)}"]`);
    if (!target || shown.has(key)) return;
    // the guess reaches the service from the kernel: give it a moment, then poll a few times
    setTimeout(() => shown.set(key, pollBars(target.parentElement, lesson, id, { interval: REVEALS_MS })), 400);
  });
  async function reveals() {
    scan();
    for (const lesson of lessons) {
      try {
        const r = await call(session(), "GET", `api/lesson/${lesson}`);
        for (const item of (r.status === 200 ? r.data.revealed : [])) {
          const key = `${item.lesson}.${item.id}`;
          if (revealed.has(key)) continue;
          revealed.add(key);
          document.dispatchEvent(new CustomEvent(REVEAL_EVENT, { bubbles: true, detail: { lesson: item.lesson, id: item.id } }));
        }
      } catch (e) { /* the service is away */ }
    }
    setTimeout(reveals, REVEALS_MS);
  }
  reveals();
}

// Loaded on a page with a session: start.
const info = session();
if (info && info.user) {
  if (info.teacher && document.querySelector(".reveal")) attachDeck(); else attachLearner();
}
