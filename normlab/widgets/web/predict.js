// The 先想一想 widgets' front-end (normlab/widgets/predict.py): spec.kind "ask" (one prompt's options,
// the learner's pick recorded) or "summary" (right / wrong per prompt of the lesson). web/common.js
// comes first (nlHtml, nlKeepKeys).
//
// live (JupyterLab, a kernel): a pick is model.set("controls", {choice}) + save_changes; Python writes
//   it to ~/.normlab/predictions.json and answers with data {choice, saved}. The summary's data is
//   {guesses: {"lesson.id": key}} read from that file; its controls {refresh: n} ask for a new reading.
// grid (the book, the slides: no kernel): the page keeps {version, guesses: {"lesson.id": {choice,
//   time}}} in localStorage[spec.storage_key] (the same shape as the file) and never calls the model.
// Either way a pick fires window event "normlab-prediction", and every summary on the page reads again.
// Drawing writes nothing: no model.set before a click (JupyterLab would mark the notebook changed).
//
// The answer stays shut until a guess is made: the export marks each prompt's answer fold with an empty
// <span class="nl-answer-for nl-answer-for-01-depth-std"> in its <summary> (normlab.course.predictions
// answer_marker). An "ask" root carries data-key and data-lock ("1": no choice yet). One capture
// listener per page (installAnswerLock) stops a click (Enter/Space on a summary is a click too) that
// would open a marked, closed fold whose prompt's widget is on the page and locked, and says why in the
// summary. It fails open: no widget on the page (cell not run, windowed away), no localStorage, the
// slides (the teacher reveals the answer to the class), a kernel that does not answer a pick.
//
// The learner copy (issue 36; normlab.course.predictions.learner_layout) collapses the experiment's code cells
// between a prompt's choice cell and its answer fold; each starts with spec.hidden_line, the text
// JupyterLab's collapsed-input placeholder shows. Once the prompt has a guess (the kernel's reply to a
// pick, or a saved guess when the widget is drawn) openExperiment clicks those placeholders open: the
// next cells from the widget's .jp-Cell up to the cell holding the fold's marker (or the next choice
// cell); and it opens the discussion after the fold, which the learner copy wraps in a fold of its own
// (its marker also has spec.discussion_class; locked like the answer until then). An opened fold says whether the guess was right (.nl-answer-verdict).
//
// Events for a class poll (issue 39), both CustomEvents:
//   "normlab:guess"  dispatched on the widget's element when the learner picks (bubbles);
//                    detail {lesson, id, choice}, e.g. {lesson: "01", id: "depth-std", choice: "B"}.
//   "normlab:reveal" listened for on document: detail {lesson, id} opens that prompt's answer fold(s)
//                    on the page, locked or not (the teacher reveals it to the class).
// Who listens: the class service's front end (normlab/classroom/web/classroom.js). Live, with the model's
// `classroom` trait set (the service's path; predict.py sets it only under a hub that runs the service),
// the first choice widget on the page loads it: <script src=BASE/api/session.js?login=1> (the browser's
// login to the service through the hub), then import(BASE/static/classroom.js). Once it is loaded, each
// widget that already has a choice (a saved guess, or a pick made while it loaded) dispatches
// "normlab:guess" again, so its class's bars appear too. No trait (one machine, the book, the slides, a
// hub without the service): nothing is requested. A service that does not answer: nothing changes.

const NL_PRED_EVENT = "normlab-prediction";
const NL_ANSWER = "nl-answer-for";
const NL_LOCK_WHY = "先在上面选一个预测再看答案 (pick a guess above first)";
const NL_KERNEL_WAIT_MS = 4000;         // a pick the kernel never answers opens the answer after this
const NL_GUESS_EVENT = "normlab:guess", NL_REVEAL_EVENT = "normlab:reveal";

const answerClass = (key) => `${NL_ANSWER}-${String(key).replace(/[^A-Za-z0-9_-]/g, "-")}`;

function browserCanStore(key) {          // a page that cannot keep a guess never locks its answers
  try {
    const probe = `${key}.probe`;
    window.localStorage.setItem(probe, "1");
    window.localStorage.removeItem(probe);
    return true;
  } catch (err) { return false; }
}

function locked(marker) {                // every choice widget on the page for this fold's prompt has no choice
  const asks = Array.from(document.querySelectorAll(".nl-pr-ask[data-key]"))
    .filter((w) => marker.classList.contains(answerClass(w.dataset.key)));
  return asks.length > 0 && asks.every((w) => w.dataset.lock === "1");   // none on the page, or one picked (the
}                                        // same prompt in another open notebook): it opens

function loadClassroom(base) {          // the class service's front end, once per page (header); a promise
  if (!base) return null;
  if (!window.__normlabClassroom) {
    const root = new URL(base, window.location.href).href;       // absolute: this module runs from a blob: URL
    window.__normlabClassroom = new Promise((resolve, reject) => {
      if (window.normlabClassroom) { resolve(); return; }       // a page of the service has its session already
      const script = nlHtml("script", { src: `${root}api/session.js?login=1` }, document.head);
      script.onload = resolve;
      script.onerror = () => reject(new Error("no class service"));
    }).then(() => import(`${root}static/classroom.js`)).then(() => true, () => false);
  }
  return window.__normlabClassroom;
}

function splitKey(key) {                // "01.depth-std" -> {lesson: "01", id: "depth-std"}
  const at = String(key).indexOf(".");
  return { lesson: String(key).slice(0, at), id: String(key).slice(at + 1) };
}

function answers() { return (window.__normlabAnswers = window.__normlabAnswers || {}); }   // key -> right option

function showVerdict(fold) {             // an opened, marked fold says whether the guess on the page was right
  const summary = fold.querySelector(":scope > summary");
  const marker = summary ? summary.querySelector(`:scope > .${NL_ANSWER}`) : null;
  if (!marker || marker.classList.contains("nl-discussion")) return;   // a verdict on the answer only
  const ask = Array.from(document.querySelectorAll(".nl-pr-ask[data-key]"))
    .find((w) => marker.classList.contains(answerClass(w.dataset.key)) && w.dataset.choice);
  const old = summary.querySelector(":scope > .nl-answer-verdict");
  if (old) old.remove();
  if (!ask || !(ask.dataset.key in answers())) return;
  const choice = ask.dataset.choice, right = answers()[ask.dataset.key];
  const ok = choice === right;
  nlHtml("span", { class: `nl-answer-verdict ${ok ? "nl-right" : "nl-wrong"}`, "data-result": ok ? "right" : "wrong",
                   text: ok ? `你的预测 (${choice})：✓ 对了 (right)` : `你的预测 (${choice})：✗ 不对，答案是 (${right}) (wrong)` }, summary);
}

function reveal(detail) {                // "normlab:reveal": open the prompt's folds, locked or not
  if (!detail || !detail.lesson || !detail.id) return;
  for (const marker of document.querySelectorAll(`.${CSS.escape(answerClass(`${detail.lesson}.${detail.id}`))}`)) {
    const fold = marker.parentElement && marker.parentElement.parentElement;
    if (fold && fold.tagName === "DETAILS") fold.open = true;
  }
}

function installFoldListeners() {       // every page with a choice widget, slides too: verdicts and reveals
  if (window.__normlabFolds) return;
  window.__normlabFolds = true;
  document.addEventListener("toggle", (ev) => {          // toggle does not bubble: caught on the way down
    if (ev.target && ev.target.tagName === "DETAILS" && ev.target.open) showVerdict(ev.target);
  }, true);
  document.addEventListener(NL_REVEAL_EVENT, (ev) => reveal(ev.detail));
}

function installAnswerLock() {
  if (window.__normlabAnswerLock) return;
  window.__normlabAnswerLock = true;
  document.addEventListener("click", (ev) => {
    const summary = ev.target && ev.target.closest ? ev.target.closest("summary") : null;
    const fold = summary ? summary.parentElement : null;
    if (!fold || fold.tagName !== "DETAILS" || fold.open) return;
    const marker = summary.querySelector(`:scope > .${NL_ANSWER}`);
    if (!marker || !locked(marker)) return;
    ev.preventDefault();
    ev.stopPropagation();
    if (!summary.querySelector(":scope > .nl-answer-why")) {
      nlHtml("span", { class: "nl-answer-why", role: "status", text: NL_LOCK_WHY }, summary);
    }
  }, true);
}

function lockStyle(key) {                // the cue on a locked fold: muted summary, the lock of predict.css (no observer needed)
  const id = "nl-answer-lock-style";
  let style = document.getElementById(id);
  if (!style) { style = nlHtml("style", { id }, document.head); style.dataset.keys = ""; }
  const keys = style.dataset.keys ? style.dataset.keys.split(" ") : [];
  if (keys.includes(key)) return;
  const ask = `.nl-pr-ask[data-key="${CSS.escape(key)}"]`;
  const when = `:root:has(${ask}[data-lock="1"]):not(:has(${ask}[data-lock="0"])) details:not([open]) > summary`;
  const mark = `.${CSS.escape(answerClass(key))}`;
  style.textContent += `${when}:has(> ${mark}) { color: #7a7a7a; }\n${when} > ${mark}::after { content: ""; }\n`;
  style.dataset.keys = [...keys, key].join(" ");
}

function setLock(root, key, shut) {
  root.dataset.lock = shut ? "1" : "0";
  if (shut) return;
  for (const marker of document.querySelectorAll(`.${CSS.escape(answerClass(key))}`)) {
    const why = marker.parentElement ? marker.parentElement.querySelector(":scope > .nl-answer-why") : null;
    if (why) why.remove();
  }
}

function openExperiment(el, spec) {      // JupyterLab: open what the learner copy shut until the guess (header)
  const disc = spec.discussion_class ? `.${CSS.escape(spec.discussion_class)}` : null;
  const mark = `.${CSS.escape(answerClass(spec.key))}`;
  if (disc) {
    for (const m of document.querySelectorAll(`${mark}${disc}`)) {
      const fold = m.parentElement && m.parentElement.parentElement;
      if (fold && fold.tagName === "DETAILS") fold.open = true;
    }
  }
  const cell = el.closest ? el.closest(".jp-Cell") : null;
  if (!cell || !spec.hidden_line) return 0;
  let opened = 0;
  for (let c = cell.nextElementSibling; c; c = c.nextElementSibling) {
    if (!c.classList.contains("jp-Cell")) continue;
    if (c.querySelector(".nl-pr-ask")) break;     // the next prompt (the cells after the fold, up to the next
                                                  // heading, are this prompt's too: a figure or check of the result)
    const other = c.querySelector("[class*='nl-answer-for-']");                // another prompt's fold or discussion
    if (other && !other.matches(mark)) break;
    const text = c.querySelector(":scope .jp-InputPlaceholder .jp-PlaceholderText");
    const line = text ? text.textContent.trim() : "";
    if (line === spec.ask_line) break;
    if (line === spec.hidden_line) { text.closest(".jp-InputPlaceholder").click(); opened += 1; }
  }
  return opened;
}

function readBrowser(key) {
  try {
    const d = JSON.parse(window.localStorage.getItem(key) || "{}");
    return d && typeof d.guesses === "object" && d.guesses ? d.guesses : {};
  } catch (err) { return {}; }          // no localStorage (a sandboxed frame) or a broken value
}

function writeBrowser(key, id, choice) {
  const guesses = readBrowser(key);
  guesses[id] = { choice, time: new Date().toISOString().slice(0, 19).replace("T", " ") };
  try { window.localStorage.setItem(key, JSON.stringify({ version: 1, guesses })); return true; }
  catch (err) { return false; }
}

function hideHostBadge(el) {             // the static host's "precomputed grid" badge means nothing here
  const host = el.closest ? el.closest(".normlab-web") : null;
  const badge = host ? host.querySelector(":scope > .normlab-web-badge") : null;
  if (badge) badge.style.display = "none";
}

function renderAsk(model, el, root, spec, live) {
  nlHtml("div", { class: "nl-pr-title", text: spec.title }, root);
  if (spec.ask) nlHtml("div", { class: "nl-pr-ask", text: spec.ask }, root);
  const group = nlHtml("div", { class: "nl-pr-options", role: "radiogroup", "aria-label": spec.title }, root);
  const status = nlHtml("div", { class: "nl-pr-status", "aria-live": "polite" }, root);
  const buttons = new Map();
  for (const o of spec.options || []) {
    const b = nlHtml("button", { type: "button", class: "nl-pr-option", role: "radio", "aria-checked": "false",
                                 "data-key": o.key }, group);
    nlHtml("span", { class: "nl-pr-key", text: `(${o.key})` }, b);
    nlHtml("span", { class: "nl-pr-text", text: o.text }, b);
    b.addEventListener("click", () => pick(o.key));
    buttons.set(o.key, b);
  }
  const where = live ? spec.where_live : spec.where_grid;
  root.dataset.key = spec.key;
  if (spec.answer) answers()[spec.key] = spec.answer;
  installFoldListeners();
  const lockable = !(el.closest && el.closest(".reveal")) && (live || browserCanStore(spec.storage_key));
  if (lockable) { installAnswerLock(); lockStyle(spec.key); }
  const lock = (shut) => setLock(root, spec.key, lockable && shut);
  let waiting = null;
  function show(choice, saved) {
    for (const [k, b] of buttons) {
      b.setAttribute("aria-checked", String(k === choice));
      b.classList.toggle("nl-pr-chosen", k === choice);
    }
    root.dataset.choice = choice || "";
    root.dataset.saved = saved ? "1" : "0";
    status.textContent = !choice ? "先选一个，再运行下面的代码、打开答案。(pick one before you run the code below and open the answer)"
      : saved ? `已记录 (saved)：(${choice})，保存在 ${where}。课末的小结会对照答案。`
      : `(${choice}) 正在保存… (saving)`;
  }
  function announce(choice) { window.dispatchEvent(new CustomEvent(NL_PRED_EVENT, { detail: { key: spec.key, choice } })); }
  function verdicts() {                  // a fold already open (fail-open, a reveal) gets its verdict now
    for (const m of document.querySelectorAll(`.${CSS.escape(answerClass(spec.key))}`)) {
      const fold = m.parentElement && m.parentElement.parentElement;
      if (fold && fold.tagName === "DETAILS" && fold.open) showVerdict(fold);
    }
  }
  function pick(choice) {
    el.dispatchEvent(new CustomEvent(NL_GUESS_EVENT, { bubbles: true, detail: { ...splitKey(spec.key), choice } }));
    if (live) {
      show(choice, false);
      model.set("controls", { choice });
      model.save_changes();
      clearTimeout(waiting);
      waiting = setTimeout(() => lock(false), NL_KERNEL_WAIT_MS);     // fail open: no answer from the kernel
    } else {
      const ok = writeBrowser(spec.storage_key, spec.key, choice);
      show(choice, ok);
      lock(false);
      if (!ok) status.textContent = `(${choice})：这个页面不能保存 (this page cannot store it: no localStorage)`;
      announce(choice);
      verdicts();
    }
  }
  if (live) {
    const d = model.get("data") || {};
    show(d.choice || "", Boolean(d.saved));
    const classroom = loadClassroom(model.get("classroom"));
    if (classroom) {
      classroom.then((ok) => {             // its bars for a guess made before the class's front end listened
        if (ok && root.isConnected && root.dataset.choice) {
          root.dispatchEvent(new CustomEvent(NL_GUESS_EVENT, { bubbles: true,
            detail: { ...splitKey(spec.key), choice: root.dataset.choice } }));
        }
      });
    }
    lock(!d.choice);
    if (d.choice) requestAnimationFrame(() => openExperiment(el, spec));   // a saved guess: once the view is in its cell
    const onData = () => {
      const d2 = model.get("data") || {};
      show(d2.choice || "", Boolean(d2.saved));
      if (d2.choice) { clearTimeout(waiting); lock(false); openExperiment(el, spec); verdicts(); }   // the kernel's reply
      if (d2.saved) announce(d2.choice);
    };
    const onError = () => { const m = model.get("error") || ""; if (m) status.textContent = m; };
    model.on("change:data", onData);
    model.on("change:error", onError);
    return () => { clearTimeout(waiting); model.off("change:data", onData); model.off("change:error", onError); root.remove(); };
  }
  const stored = readBrowser(spec.storage_key)[spec.key];
  show(stored && stored.choice ? stored.choice : "", Boolean(stored && stored.choice));
  lock(!(stored && stored.choice));
  return () => root.remove();
}

function renderSummary(model, el, root, spec, live) {
  nlHtml("div", { class: "nl-pr-title", text: spec.title }, root);
  const total = nlHtml("div", { class: "nl-pr-total", "aria-live": "polite" }, root);
  const table = nlHtml("table", { class: "nl-pr-table" }, root);
  const head = nlHtml("tr", {}, nlHtml("thead", {}, table));
  for (const h of ["#", "题 (prompt)", "你的预测 (guess)", "答案 (answer)", "结果 (result)"]) nlHtml("th", { text: h }, head);
  const body = nlHtml("tbody", {}, table);
  const foot = nlHtml("div", { class: "nl-pr-foot" }, root);
  const again = nlHtml("button", { type: "button", class: "nl-pr-refresh", text: "重新读取 (refresh)" }, foot);
  nlHtml("span", { class: "nl-pr-where", text: `预测保存在 ${live ? spec.where_live : spec.where_grid}` }, foot);
  const optionText = (p, k) => { const o = (p.options || []).find((q) => q.key === k); return o ? `(${k}) ${o.text}` : "—"; };
  function draw(guesses) {
    body.textContent = "";
    let right = 0, done = 0;
    (spec.prompts || []).forEach((p, i) => {
      const g = guesses[p.key] || "";
      const ok = g ? g === p.answer : null;
      if (g) { done += 1; if (ok) right += 1; }
      const tr = nlHtml("tr", { "data-key": p.key, "data-result": ok === null ? "none" : ok ? "right" : "wrong" }, body);
      nlHtml("td", { text: String(i + 1) }, tr);
      nlHtml("td", { class: "nl-pr-prompt", text: `${(p.starts || p.id).replace(/`/g, "")}…` }, tr);
      nlHtml("td", { text: g ? optionText(p, g) : "— 没有预测 (no guess)" }, tr);
      nlHtml("td", { text: g ? optionText(p, p.answer) : "先预测再看 (guess first)" }, tr);   // no answer without a guess
      nlHtml("td", { class: "nl-pr-result", text: ok === null ? "—" : ok ? "✓ 对 (right)" : "✗ 错 (wrong)" }, tr);
    });
    const n = (spec.prompts || []).length;
    total.textContent = `${n} 题里预测了 ${done} 题，对了 ${right} 题 (guessed ${done} of ${n}, ${right} right)`;
    root.dataset.right = String(right); root.dataset.done = String(done);
  }
  const fromLive = () => draw((model.get("data") || {}).guesses || {});
  const fromBrowser = () => {
    const all = readBrowser(spec.storage_key), g = {};
    for (const [k, v] of Object.entries(all)) if (v && v.choice) g[k] = v.choice;
    draw(g);
  };
  const ask = () => {
    if (!live) { fromBrowser(); return; }
    const c = model.get("controls") || {};
    model.set("controls", { refresh: (Number(c.refresh) || 0) + 1 });
    model.save_changes();
  };
  again.addEventListener("click", ask);
  const onPick = (ev) => { if (ev.detail && String(ev.detail.key).startsWith(`${spec.lesson}.`)) ask(); };
  window.addEventListener(NL_PRED_EVENT, onPick);
  if (live) { model.on("change:data", fromLive); fromLive(); } else fromBrowser();
  return () => { window.removeEventListener(NL_PRED_EVENT, onPick); if (live) model.off("change:data", fromLive); root.remove(); };
}

function render({ model, el }) {
  const spec = model.get("spec") || {};
  const live = model.get("source") !== "grid";
  const root = nlHtml("div", { class: `nl-predict nl-pr-${spec.kind === "summary" ? "summary" : "ask"}`,
                               "data-source": live ? "live" : "grid" }, el);
  nlKeepKeys(root);
  if (!live) hideHostBadge(el);
  return spec.kind === "summary" ? renderSummary(model, el, root, spec, live) : renderAsk(model, el, root, spec, live);
}

export default { render };
