"""The 先想一想 choices (issue 28 item 2): normlab/course/predictions_data.py against the lessons.

* every **先想一想** prompt of 01-09 has exactly one entry and every entry ties to exactly one prompt;
* the right option is the one the lesson's own answer (the <details> after the prompt) gives: the
  answer's bold opening is quoted in the entry (``evidence``), a lettered answer "**(B)**" is the
  entry's answer key, a prompt's own (A)/(B)/(C) options are the entry's options in order, and the
  right option's words appear in the lesson's answer (read from the sources, not from the data);
* the exported notebooks (normlab.course.export: solution and learner copies) have a choice cell right
  after each prompt's cell and the summary as the last cell, and those cells run: a pick is saved to
  the file (and only a pick: drawing a widget writes nothing), the summary scores it against the data;
* issue 36: no text a learner reads before the answer holds one of the prompt's ``reveals``; the
  learner copy keeps the experiment's code collapsed until the guess; in a real kernel the learner
  copy's choice cell waits for the pick (Run All stops there) and runs on after it, an interrupt ends
  the wait with one line, and a runner's NORMLAB_PREDICT_WAIT=0 never waits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from normlab import course
from normlab.course import predictions as P

ROOT = Path(__file__).resolve().parent.parent
LESSONS = [p for p in sorted((ROOT / "notebooks").glob("0[1-9]_*.md"))]


def lesson_prompts() -> list[tuple[str, str, str]]:
    """(lesson, prompt text, the source text after the prompt) for every prompt of 01-09, read from
    the sources with a regular expression of its own (not normlab.course.predictions.prompt_texts)."""
    out = []
    for src in LESSONS:
        text = src.read_text(encoding="utf-8")
        for m in re.finditer(r"^\*\*先想一想\*\*(.*)$", text, re.M):
            prompt = re.sub(r"^（[^）]*）", "", m.group(1).strip()).lstrip("：").strip()
            out.append((src.name[:2], prompt, text[m.end():]))
    return out


def answer_after(rest: str) -> str:
    """The first <details> answer after a prompt, without its summary line."""
    m = re.search(r"<details><summary>[^<]*</summary>(.*?)</details>", rest, re.S)
    assert m, "no <details> answer after the prompt"
    return m.group(1).strip()


def norm(s: str) -> str:
    return re.sub(r"[\s*`，、；：。（）()]", "", s)


PROMPTS = lesson_prompts()


def test_every_prompt_has_one_entry_and_every_entry_one_prompt():
    assert len(PROMPTS) >= 30
    entries = P.entries()
    for lesson, prompt, _ in PROMPTS:
        found = [e["id"] for e in entries if e["lesson"] == lesson and prompt.startswith(e["starts"])]
        assert len(found) == 1, f"{lesson}: prompt {prompt[:30]!r} has entries {found}"
    for e in entries:
        found = [p for lesson, p, _ in PROMPTS if lesson == e["lesson"] and p.startswith(e["starts"])]
        assert len(found) == 1, f"{e['lesson']}.{e['id']}: ties to {len(found)} prompts"
    ids = [f"{e['lesson']}.{e['id']}" for e in entries]
    assert len(ids) == len(set(ids))
    assert all(2 <= len(e["options"]) <= 5 and all(len(o) <= 40 for o in e["options"]) for e in entries)


@pytest.mark.parametrize("lesson,prompt,rest", PROMPTS, ids=[f"{lz}-{i}" for i, (lz, _, _) in enumerate(PROMPTS)])
def test_right_option_is_the_lessons_answer(lesson, prompt, rest):
    (e,) = [e for e in P.entries(lesson) if prompt.startswith(e["starts"])]
    answer = answer_after(rest)
    assert answer[:120].startswith(e["evidence"]) or e["evidence"] in answer[:120], (e["id"], answer[:120])
    lettered = re.match(r"\*\*\(([A-H])\)\*\*", answer)
    pieces = re.split(r"\(([A-H])\)", prompt)          # text, "A", its option, "B", ...
    own = [(k, re.split(r"[；？?]", v)[0].strip().rstrip("。")) for k, v in zip(pieces[1::2], pieces[2::2])]
    if lettered:
        assert e["answer"] == lettered.group(1), (e["id"], lettered.group(1))
        assert [k for k, _ in own] == e["keys"], (e["id"], own)
    if lettered and own:
        for (key, text), option in zip(own, e["options"]):
            assert norm(option) == norm(text), (e["id"], key, option, text)
    else:
        right = e["options"][e["keys"].index(e["answer"])]
        if e["id"] in WORDED_DIFFERENTLY:           # checked by hand: the answer's own words, quoted
            reading, quotes = WORDED_DIFFERENTLY[e["id"]]
            assert right == reading, (e["id"], right, reading)
            for quote in quotes:
                assert quote in answer, (e["id"], quote, answer[:200])
        else:
            assert norm(right) in norm(answer), (e["id"], right, answer[:120])
    for key, lo, hi in RECORDED.get(e["id"], ()):           # "几倍" / "几十倍" against the recorded range
        (m,) = re.findall(rf"<!--rec {re.escape(key)} ([-\d.e]+)\.\.([-\d.e]+)-->", answer)
        assert lo <= float(m[0]) <= float(m[1]) < hi, (e["id"], key, m, lo, hi)


# Right options whose words the lesson's answer does not repeat verbatim, read by hand: id -> (the
# option the answer makes right, the answer's words that make it so; each must still be in the answer).
WORDED_DIFFERENTLY = {
    "var-default": ("除以 E − 1：输出 × √(7/8) ≈ 0.935",
                    ["**除以 E − 1**", r"$\sqrt{(E-1)/E} = \sqrt{7/8} \approx 0.935$ 倍"]),
    "padding": ("BN 会变，LN 不变", ["**BN 会变，LN 一位不差**"]),
    "top-ffn-grad": ("Post-LN 大，大几倍", ["**Post-LN 大**，是 Pre-LN 的"]),
    "qk-logit": ("不加：原来的十几到几十倍；加了：压在 10 左右到二十几",
                 ["**不加时是原来的", "三种 QK-norm 都把最大 logit 压在 10 左右到二十几"]),
    "ln-grad-identity": ("LayerNorm：两条都满足 (C)；RMSNorm：只有 (B)", ["**LayerNorm：(C)；RMSNorm：只有 (B)。**"]),
    "add-ln-bytes": ("更慢，但 2.5 倍只是量级（都在 1.5 倍以上）", ['**第二问：一定更慢，但"2.5 倍"只是量级**', "都大于 1.5"]),
}
# Options that name an order of magnitude: the lesson's recorded range (its <!--rec--> marker) must
# lie in it, so a re-sweep that moved the number out of "几倍" fails here.
RECORDED = {
    "pre-ln-stream": [("stream.pre_24_over_1", 2, 3.0001)],
    "top-ffn-grad": [("xiong.post_over_pre_l6", 2, 10)],
    "skip-layer": [("width.skip_pre_l3_6_max", 1, 10), ("width.skip_post_median", 10, 1000)],
    "qk-logit": [("qk.none_big_over_small_lr", 10, 100)],
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("nb")
    course.export(out, srcs=LESSONS)
    return out


def test_export_puts_a_choice_after_each_prompt_and_a_summary_last(exported):
    import nbformat

    files = sorted(exported.glob("*.ipynb"))
    assert len(files) >= len(LESSONS)
    total = 0
    for f in files:
        lesson = f.name[:2]
        cells = nbformat.read(f, as_version=4).cells
        prompts = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and "**先想一想**" in c.source]
        assert prompts, f.name
        for i in prompts:
            ids = [e["id"] for e in P.entries(lesson)
                   if any(t.startswith(e["starts"]) for t in P.prompt_texts(cells[i].source))]
            nxt = cells[i + 1]
            assert nxt.cell_type == "code" and P.PREDICT_TAG in nxt.metadata.get("tags", []), (f.name, i)
            form = P.learner_ask_source if is_learner_copy(f) else P.ask_source     # the learner copy waits
            assert nxt.source == form(lesson, ids[0]), (f.name, nxt.source)
        asks = [c for c in cells if P.PREDICT_TAG in c.metadata.get("tags", [])]
        assert len(asks) == len(P.entries(lesson)), f.name
        assert cells[-1].source == P.summary_source(lesson) and P.SUMMARY_TAG in cells[-1].metadata["tags"]
        total += len(asks)
    assert total >= 2 * 30 - 4          # solution + learner copies of the lessons with answers
    # run again over an exported notebook: the old cells are replaced, not doubled
    nb = nbformat.read(files[0], as_version=4)
    n = len(nb.cells)
    assert len(P.with_prediction_cells(nb, files[0].stem).cells) == n


FOLD = re.compile(r'<details>\s*<summary>([^<]*?)\s*(?:<span class="nl-answer-for ([^"]+)"></span>)?</summary>(.*?)</details>', re.S)


def test_each_answer_fold_is_tied_to_its_own_prompt(exported):
    """In every exported copy (solution and learner), the answer fold of each prompt with an entry (in
    the source, the first <details> after the prompt: this test's own reading, answer_after) carries
    that prompt's class, and sits after the prompt's choice cell and before the next prompt's; no other
    fold (hints, the drills' "两级各查什么", a second fold) carries one, and those are as in the source."""
    import nbformat

    sources = {p.stem: p.read_text(encoding="utf-8") for p in LESSONS}
    files = sorted(exported.glob("*.ipynb"))
    tagged_total = 0
    for f in files:
        lesson, stem = f.name[:2], next(s for s in sources if f.stem.startswith(s))
        expected = {}                                   # class -> the answer's text, from the source
        for lz, prompt, rest in PROMPTS:
            if lz == lesson:
                (e,) = [e for e in P.entries(lesson) if prompt.startswith(e["starts"])]
                expected[P.answer_class(f"{lesson}.{e['id']}")] = answer_after(rest)
        assert len(set(expected)) == len(P.entries(lesson)), f.name        # one class per prompt: none shared
        cells = nbformat.read(f, as_version=4).cells
        asks = {P.answer_class(re.search(r'predict\.ask\("(\d+)", "([^"]+)"\)', c.source).expand(r"\1.\2")): i
                for i, c in enumerate(cells) if P.PREDICT_TAG in c.metadata.get("tags", [])}
        found, others = {}, []
        for i, c in enumerate(cells):
            if c.cell_type != "markdown":
                continue
            if DISCUSSION.match(c.source):                       # a learner copy's discussion: its text alone
                c = nbformat.from_dict({**c, "source": DISCUSSION.match(c.source).group(2)})
            assert c.source.count("<details") == len(FOLD.findall(c.source)), (f.name, i)
            for summary, cls, body in FOLD.findall(c.source):
                if cls:
                    assert cls not in found, (f.name, cls, "tagged twice")
                    found[cls] = (i, summary, body.strip())
                else:
                    others.append(f"<details><summary>{summary}</summary>{body}</details>")
        assert set(found) == set(expected), (f.name, sorted(found), sorted(expected))
        order = sorted(asks.values())
        for cls, (i, summary, body) in found.items():
            assert summary == "答案 (answer)" and body == expected[cls], (f.name, cls, body[:80])
            later = [j for j in order if j > asks[cls]]
            assert asks[cls] < i < (later[0] if later else len(cells)), (f.name, cls, i, asks[cls])
        for fold in others:                                    # untouched: the source's own text
            assert fold in sources[stem], (f.name, fold[:80])
        assert sources[stem].count("<details") == len(found) + len(others), f.name     # none lost, none added
        tagged_total += len(found)
    assert tagged_total >= 2 * 30 - 4
    # exported again: the same markers, not doubled
    nb = nbformat.read(files[0], as_version=4)
    before = [c.source for c in nb.cells if c.cell_type == "markdown"]
    assert [c.source for c in P.with_prediction_cells(nb, files[0].stem).cells if c.cell_type == "markdown"] == before


def test_slides_lay_out_the_marked_answers_as_before(exported):
    """The marker inside an answer's summary changes nothing in the slides' layout (tools/slide_layout.py
    finds an answer by its opening "<details><summary>答案"): the same slides, sizes and answers as with
    the markers taken out."""
    import copy
    import sys

    import nbformat

    sys.path.insert(0, str(ROOT / "tools"))
    import slide_layout

    for f in sorted(exported.glob("0[1-9]_*[a-z].ipynb")):
        if is_learner_copy(f):                 # the slides are made from the solution copies
            continue
        tagged = nbformat.read(f, as_version=4)
        plain = copy.deepcopy(tagged)
        for c in plain.cells:
            c.source = re.sub(r'<span class="nl-answer-for[^"]*"></span>', "", c.source)
        assert plain.cells != tagged.cells, f.name
        a, b = slide_layout.slide_types(plain), slide_layout.slide_types(tagged)
        assert a.sizes == b.sizes and [c.metadata.get("slideshow") for c in plain.cells] == \
            [c.metadata.get("slideshow") for c in tagged.cells], f.name


def test_fold_tagging_skips_what_is_not_a_prompts_answer():
    """A hint before the answer, a prompt with no entry, and a second answer fold stay untagged."""
    import nbformat

    prompt = next(e for e in P.entries("01") if e["id"] == "depth-std")
    md = nbformat.v4.new_markdown_cell
    nb = nbformat.v4.new_notebook(cells=[
        md(f"**先想一想**：{prompt['starts']}……"),
        md("<details><summary>提示 (hint)</summary>\n\n提示\n\n</details>"),
        md("<details><summary>答案 (answer)</summary>\n\nA1\n\n</details>\n\n"
           "<details><summary>答案 (answer)</summary>\n\nA2\n\n</details>"),
        md("**先想一想**：没有条目的题……\n\n<details><summary>答案 (answer)</summary>\n\nA3\n\n</details>"),
    ])
    out = [c.source for c in P.with_prediction_cells(nb, "01_toy").cells if c.cell_type == "markdown"]
    marker = P.answer_marker("01.depth-std")
    tags = [o.count('<span class="nl-answer-for') for o in out]
    assert tags == [0, 0, 1, 0], out
    assert out[2].index(marker) < out[2].index("A1") < out[2].index("A2")
    assert P.answer_class("02.momentum-0.9") == "nl-answer-for-02-momentum-0-9"


def test_cells_run_a_pick_is_saved_and_scored(exported, tmp_path, monkeypatch):
    """The inserted cells' code, run as the kernel runs it: drawing writes nothing; a pick (the
    front-end's controls change) writes the file; the summary scores it with the data's answers."""
    store = tmp_path / "家 目录" / "predictions.json"
    monkeypatch.setenv("NORMLAB_PREDICTIONS", str(store))
    import nbformat

    cells = nbformat.read(exported / "01_residuals.ipynb", as_version=4).cells
    ns: dict = {}
    widgets = []
    for c in cells:
        if P.PREDICT_TAG in c.metadata.get("tags", []) or P.SUMMARY_TAG in c.metadata.get("tags", []):
            *body, last = c.source.split("\n")
            exec("\n".join(body), ns)
            widgets.append(eval(last, ns))
    *asks, summary = widgets
    assert len(asks) == 4 and not store.exists(), "drawing a widget must write nothing"
    bundle, _ = asks[0]._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and not store.exists()
    asks[0].set_controls(choice="B")                       # right (lesson 01's answer: (B))
    asks[1].set_controls(choice="A")                       # wrong (the answer is (C))
    saved = json.loads(store.read_text(encoding="utf-8"))["guesses"]
    assert {k: v["choice"] for k, v in saved.items()} == {"01.depth-std": "B", "01.typical-gain": "A"}
    assert asks[0].data == {"choice": "B", "saved": True}
    summary.set_controls(refresh=1)
    assert summary.data["guesses"] == {"01.depth-std": "B", "01.typical-gain": "A"}
    rows = {r["id"]: r["right"] for r in summary.rows()}
    assert rows == {"depth-std": True, "typical-gain": False, "lesion": None, "rezero-std": None}
    assert "2 题有预测 (guessed)，1 题对 (right)" in summary.caption()
    # a bad option is refused with the Chinese message, the saved guess stays
    asks[0].set_controls(choice="Z")
    assert "选项 (option)" in asks[0].error and P.load_guesses()["01.depth-std"]["choice"] == "B"
    with pytest.raises(P.PredictionError, match="没有这个预测题"):
        exec('predict.ask("01", "nope")', ns)


def test_static_fragment_writes_nothing_and_knows_every_option(monkeypatch, tmp_path):
    monkeypatch.setenv("NORMLAB_PREDICTIONS", str(tmp_path / "p.json"))
    monkeypatch.setenv("NORMLAB_STATIC", "1")
    from normlab.widgets import predict

    w = predict.ask("03", "padding")
    bundle, _ = w._repr_mimebundle_()
    assert 'data-widget="predict"' in bundle["text/html"] and not (tmp_path / "p.json").exists()
    assert sorted(w.static_grid()) == ["", "A", "B", "C", "D"]
    assert "(B) BN 会变，LN 不变" in bundle["text/plain"]


def test_unreadable_store_is_no_guesses(tmp_path, monkeypatch):
    bad = tmp_path / "predictions.json"
    bad.write_text("{not json", encoding="utf-8")
    monkeypatch.setenv("NORMLAB_PREDICTIONS", str(bad))
    assert P.load_guesses() == {}
    P.save_guess("02", "noisy-bn", "B")
    assert P.load_guesses()["02.noisy-bn"]["choice"] == "B"


# --- in Chromium, with no kernel (the book, the slides) ------------------------------------------------

def fold(key: str, body: str) -> str:
    """An answer fold as the export writes it (key "": a fold that is no prompt's answer)."""
    summary = f"答案 (answer){P.answer_marker(key)}" if key else "提示 (hint)"
    return f"<details><summary>{summary}</summary><p class='body'>{body}</p></details>"


LOCKED = "先在上面选一个预测再看答案 (pick a guess above first)"
OPEN_JS = "d => d.open"


def lock_cue(fold) -> bool:
    """The fold's summary shows the lock (its marker's ::after drawn)."""
    return fold.locator(".nl-answer-for").evaluate(
        "m => { const a = getComputedStyle(m, '::after'); return a.content !== 'none' && a.backgroundImage.includes('svg') "
        "&& parseFloat(a.width) > 0; }")


@pytest.fixture
def static_page(tmp_path, monkeypatch):
    """A page with lesson 01's choice widgets and its summary as the book embeds them (no kernel)."""
    monkeypatch.setenv("NORMLAB_STATIC", "1")
    monkeypatch.setenv("NORMLAB_PREDICTIONS", str(tmp_path / "never.json"))
    from normlab.widgets import predict

    parts = [predict.ask("01", e["id"])._repr_mimebundle_()[0]["text/html"] for e in P.entries("01")]
    # answer folds as the export marks them: 01.depth-std's after its widget, then one of a prompt whose
    # widget is not on this page (02.grad-mode), a hint (no mark), and 01.typical-gain's
    parts[0] += fold("01.depth-std", "depth-std 的答案") + fold("02.grad-mode", "grad-mode 的答案") + fold("", "提示")
    parts[1] += fold("01.typical-gain", "typical-gain 的答案")
    parts.append(predict.summary("01")._repr_mimebundle_()[0]["text/html"])
    page = tmp_path / "预测 页.html"
    page.write_text("<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'></head>"
                    "<body style='width:760px'>" + "<p>…</p>".join(parts) + "</body></html>", encoding="utf-8")
    yield page
    assert not (tmp_path / "never.json").exists()


def test_static_choices_are_kept_in_the_browser_and_scored(browser, static_page, artifacts):
    from test_browser_widgets import watch, widgets

    page = browser.new_page(viewport={"width": 800, "height": 900})
    problems = watch(page)
    page.goto(static_page.as_uri(), wait_until="load")
    boxes = widgets(page)
    assert len(boxes) == 5 and not page.locator(".normlab-web-failed").count()
    summary = page.locator(".nl-pr-summary")
    assert summary.get_attribute("data-done") == "0"
    assert page.locator(".normlab-web-badge:visible").count() == 0      # "precomputed grid" means nothing here
    first = page.locator(".nl-pr-ask").nth(0)
    # before a pick: the fold of 01.depth-std stays shut (a click, and Enter on its summary) and says why;
    # the fold of a prompt whose widget is not on the page and the hint open as before
    folds = page.locator("details")
    own, absent, hint, other = (folds.nth(i) for i in range(4))
    own.locator("summary").click()
    assert not own.evaluate(OPEN_JS) and own.locator(".nl-answer-why").inner_text() == LOCKED
    own.locator("summary").focus()
    page.keyboard.press("Enter")
    assert not own.evaluate(OPEN_JS) and own.locator(".nl-answer-why").count() == 1
    assert lock_cue(own) and not lock_cue(absent)                        # the cue: a lock on the shut fold
    absent.locator("summary").click()
    hint.locator("summary").click()
    assert absent.evaluate(OPEN_JS) and hint.evaluate(OPEN_JS)
    page.screenshot(path=str(artifacts / "predict_static_locked.png"), full_page=True)
    first.get_by_role("radio", name="(B)").click()                       # right: lesson 01's first answer is (B)
    assert own.locator(".nl-answer-why").count() == 0 and not lock_cue(own) and lock_cue(other)
    other.locator("summary").click()                                     # 01.typical-gain: still no guess
    assert not other.evaluate(OPEN_JS) and other.locator(".nl-answer-why").count() == 1
    own.locator("summary").click()
    assert own.evaluate(OPEN_JS) and own.locator(".body").is_visible()
    assert own.locator(".nl-answer-verdict").get_attribute("data-result") == "right"      # the fold says so
    page.locator(".nl-pr-ask").nth(1).get_by_role("radio", name="(A)").click()   # wrong: the answer is (C)
    other.locator("summary").click()
    assert other.evaluate(OPEN_JS)
    verdict = other.locator(".nl-answer-verdict")
    assert verdict.get_attribute("data-result") == "wrong" and "(C)" in verdict.inner_text()
    assert absent.locator(".nl-answer-verdict").count() == 0             # no guess on the page for it
    assert first.get_attribute("data-choice") == "B" and first.get_attribute("data-saved") == "1"
    assert "已记录 (saved)：(B)" in first.inner_text()
    assert summary.get_attribute("data-done") == "2" and summary.get_attribute("data-right") == "1"
    rows = summary.locator("tbody tr")
    assert [rows.nth(i).get_attribute("data-result") for i in range(4)] == ["right", "wrong", "none", "none"]
    answers = [rows.nth(i).locator("td").nth(3).inner_text() for i in range(4)]    # no answer without a guess
    assert answers[:2] == ["(B) 普通堆叠不到万分之一，残差堆叠比 1 倍还大", "(C) 缩小到百万分之一上下"]
    assert answers[2:] == ["先预测再看 (guess first)"] * 2
    stored = json.loads(page.evaluate(f"() => localStorage.getItem('{P.STORAGE_KEY}')"))
    assert {k: v["choice"] for k, v in stored["guesses"].items()} == {"01.depth-std": "B", "01.typical-gain": "A"}
    page.screenshot(path=str(artifacts / "predict_static.png"), full_page=True)
    page.reload(wait_until="load")                                       # kept across a reload
    widgets(page)
    assert page.locator(".nl-pr-ask").nth(0).get_attribute("data-choice") == "B"
    assert page.locator(".nl-pr-summary").get_attribute("data-right") == "1"
    own = page.locator("details").nth(0)
    own.locator("summary").click()                                       # the guess is kept: the answer opens
    assert own.evaluate(OPEN_JS)
    size = page.evaluate("() => Math.min(...Array.from(document.querySelectorAll('.nl-predict *'))"
                         ".filter(e => e.getClientRects().length && e.childNodes.length)"
                         ".map(e => parseFloat(getComputedStyle(e).fontSize)))")
    assert size >= 15, size
    page.close()
    assert not problems, problems
    # fail open: a browser that cannot keep a guess (no localStorage) never locks an answer
    page = browser.new_page(viewport={"width": 800, "height": 900})
    page.add_init_script("Storage.prototype.setItem = function () { throw new Error('no storage'); }")
    page.goto(static_page.as_uri(), wait_until="load")
    widgets(page)
    assert page.locator(".nl-pr-ask").nth(0).get_attribute("data-lock") == "0"
    page.locator("details").nth(0).locator("summary").click()
    assert page.locator("details").nth(0).evaluate(OPEN_JS)
    page.close()


# --- through the book's and the slides' real build (Sphinx, the slides' exporter), no kernel -----------

PREDICT_CELLS = 'from normlab.widgets import predict\npredict.ask("01", "depth-std")'


# A page holding a choice, its answer fold (marked as the export marks it), a hint and the summary of
# lesson 01: built with conftest's toy_site as tools/book.py builds the course's (executed with
# NORMLAB_STATIC=1, static_widgets, Sphinx, the slides' exporter).
PREDICT_PAGE = {"98_predict_toy": (
    f"# 预测\n\n**先想一想**：……\n\n```{{code-cell}} ipython3\n:tags: [remove-input]\n\n{PREDICT_CELLS}\n```\n\n"
    f"{fold('01.depth-std', 'depth-std 的答案')}\n\n{fold('', '提示')}\n\n"
    f"## 小结\n\n```{{code-cell}} ipython3\n{P.summary_source('01')}\n```\n", "预测")}


@pytest.fixture(scope="module")
def predict_site(toy_site):
    html, deck, _ = toy_site
    return html / "notebooks" / "98_predict_toy.html", deck / "98_predict_toy.slides.html"


@pytest.mark.parametrize("where", ["book", "slides"])
def test_choice_in_the_built_book_and_slides(browser, predict_site, artifacts, where):
    from test_browser_widgets import show_slide, watch, widgets

    path = predict_site[0] if where == "book" else predict_site[1]
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    problems = watch(page)
    page.goto(path.as_uri(), wait_until="load")
    if where == "slides":
        page.wait_for_selector(".reveal.ready", timeout=15000)
    assert len(widgets(page)) == 2 and not page.locator(".normlab-web-failed").count()
    if where == "book":
        assert "predict.ask" not in page.locator("body").inner_text()        # remove-input: the widget, not its code
    ask = page.locator(".nl-pr-ask")
    answer, hint = page.locator("details:has(.nl-answer-for)"), page.locator("details:not(:has(.nl-answer-for))")
    assert answer.count() == 1 and hint.count() == 1            # the marker came through Sphinx / the exporter
    if where == "slides":       # no lock: the teacher opens the answer for the class, whose guesses are not this browser's
        assert ask.get_attribute("data-lock") == "0"
        answer.locator("summary").evaluate("s => s.click()")
        assert answer.evaluate(OPEN_JS)
        show_slide(page, page.locator(".normlab-web").first.element_handle())
    else:
        answer.scroll_into_view_if_needed()
        answer.locator("summary").click()
        assert not answer.evaluate(OPEN_JS) and answer.locator(".nl-answer-why").inner_text() == LOCKED
        assert lock_cue(answer)
        hint.locator("summary").click()
        assert hint.evaluate(OPEN_JS)
        page.screenshot(path=str(artifacts / "predict_book_locked.png"))
    ask.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    ask.get_by_role("radio", name="(B)").click()
    assert ask.get_attribute("data-saved") == "1"
    assert page.locator(".nl-pr-summary").get_attribute("data-right") == "1"
    ask.screenshot(path=str(artifacts / f"predict_{where}.png"))
    if where == "book":
        answer.locator("summary").click()
        assert answer.evaluate(OPEN_JS) and answer.locator(".nl-answer-why").count() == 0
        page.screenshot(path=str(artifacts / "predict_book_opened.png"))
    page.close()
    assert not problems, problems


# --- nothing a learner reads before the answer gives it away (issue 36 item 4) -------------------------

def reading_order(src: Path) -> list[tuple[str, str]]:
    """The lesson as a learner reads it, cell by cell: ("md", markdown without its invisible HTML
    comments) or ("code", the code cell's comments, the prose a code cell holds). Speaker notes,
    which learners never get, are left out. Read with jupytext, not normlab."""
    import jupytext

    out = []
    for c in jupytext.read(src).cells:
        if c.get("metadata", {}).get("slideshow", {}).get("slide_type") == "notes":
            continue
        if c.cell_type == "markdown":
            out.append(("md", re.sub(r"<!--.*?-->", "", c.source, flags=re.S)))
        elif c.cell_type == "code":
            out.append(("code", "\n".join(re.findall(r"#.*$", c.source, re.M))))
    return out


def before_and_until_answer(src: Path) -> list[tuple[str, str, str, str]]:
    """(prompt, the section's text before it, the text from it up to its answer fold, the fold) per
    prompt: the section starts at the last markdown heading before the prompt."""
    blocks = reading_order(src)
    flat, heads = "", []
    for kind, text in blocks:
        if kind == "md":
            heads += [len(flat) + m.start() for m in re.finditer(r"^#{1,6} ", text, re.M)]
        flat += text + "\n\n"
    out = []
    for m in re.finditer(r"^\*\*先想一想\*\*.*$", flat, re.M):
        start = max([h for h in heads if h < m.start()], default=0)
        fold = flat.find("<details><summary>答案", m.start())
        end = flat.find("</details>", fold)
        out.append((m.group(0), flat[start:m.start()], flat[m.start():fold], flat[fold:end]))
    return out


REGIONS = [(src.name[:2], *r) for src in LESSONS for r in before_and_until_answer(src)]


@pytest.mark.parametrize("lesson,prompt,before,until,fold", REGIONS,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(REGIONS)])
def test_no_sentence_before_the_answer_gives_it_away(lesson, prompt, before, until, fold):
    """Neither the section's text before a prompt nor the text from the prompt to its answer fold (its
    experiment's code comments included: the learner copy opens that code only after the guess, the
    solution copy and the slides show it) holds one of the prompt's ``reveals``; and the phrases are
    the answer's: at least one of them is in the lesson's own answer fold (else the check is empty)."""
    text = re.sub(r"^（[^）]*）", "", prompt.removeprefix("**先想一想**").strip()).lstrip("：").strip()
    (e,) = [e for e in P.entries(lesson) if text.startswith(e["starts"])]
    assert any(r in fold for r in e["reveals"]), (e["id"], "none of its reveals is in its answer", fold[:120])
    for where, region in (("before the prompt", before), ("between the prompt and its answer", until)):
        found = [r for r in e["reveals"] if r in region]
        assert not found, f"{lesson}.{e['id']}: {where}: {found} in …{region[max(0, region.find(found[0]) - 80):][:200]}…"


# --- the learner copy: a question before it is code (issue 36 items 1-3) --------------------------------

def is_learner_copy(f: Path) -> bool:
    """NAME_learner.ipynb, or the one copy of a lesson without answers (no NAME_learner beside it)."""
    return f.stem.endswith("_learner") or not f.with_name(f"{f.stem}_learner.ipynb").exists()


def test_learner_copy_hides_the_experiment_until_the_guess(exported):
    """In every learner copy each choice cell waits for the guess (``await``) and shows only its first line
    (a sentence, not code); its prompt lists every option (its own (A)/(B)/…, or the list the export adds
    to a prompt that asks for a number); every code cell between it and its answer
    fold is collapsed and starts with the line the front-end looks for, so no ``expect`` line and no
    comment under a prompt is in view before the guess. The solution copies keep today's layout."""
    import nbformat

    learner = [f for f in sorted(exported.glob("*.ipynb")) if is_learner_copy(f)]
    assert len(learner) >= 9
    collapsed = 0
    for f in sorted(exported.glob("*.ipynb")):
        cells = nbformat.read(f, as_version=4).cells
        hidden = [c.metadata.get("jupyter", {}).get("source_hidden", False)          # (the setup cell: folded
                  and course.SETUP_TAG not in c.metadata.get("tags", []) for c in cells]  # in every copy)
        if f not in learner:
            assert not any(hidden) and not any("await predict.ask" in c.source for c in cells), f.name
            continue
        pending, before = None, None
        for c, h in zip(cells, hidden):
            if P.PREDICT_TAG in c.metadata.get("tags", []):
                lesson, pid = re.search(r'await predict\.ask\("(\d+)", "([^"]+)"\)', c.source).groups()
                e = P.entry(lesson, pid)
                assert h and c.source.split("\n")[0] == P.ASK_LINE and c.source.split("\n")[0].startswith("# "), f.name
                assert not c.get("outputs")                 # nbval fails a never-run cell with outputs
                (prompt,) = [t for t in P.prompt_texts(before.source) if t.startswith(e["starts"])]
                if "(A)" in prompt:
                    assert all(f"({k})" in prompt for k in e["keys"]) and P.CHOICES not in before.source, e["id"]
                else:
                    assert all(f"**({k})** {t}" in before.source.split(P.CHOICES)[-1]
                               for k, t in zip(e["keys"], e["options"])), e["id"]
                pending = P.answer_class(f"{lesson}.{pid}")
            elif pending and c.cell_type == "markdown" and pending in c.source:
                pending = None
            elif pending and c.cell_type == "code":
                assert h and c.source.startswith(P.HIDDEN_LINE + "\n"), (f.name, c.source[:80])
                collapsed += 1
            if c.cell_type == "markdown":
                before = c
        assert not pending, f.name
    assert collapsed >= 30


DISCUSSION = re.compile(r'^<details class="nl-discussion"><summary>[^<]*<span class="nl-answer-for (nl-answer-for-[^ "]+) '
                        r'nl-discussion"></span></summary>\n\n(.*)\n\n</details>$', re.S)


def test_the_discussion_after_a_fold_waits_for_the_guess_too(exported):
    """The paragraph right after an answer fold (01 §1: "…32 层之后几乎为零…（上面的 58–105 倍）") is, in the
    learner copy, a fold locked like the answer (a collapsed cell would not do: JupyterLab's Run All
    renders and opens every markdown cell), when it is a cell of its own that only discusses the
    result; its text is the source's, unchanged; never a section's heading."""
    import nbformat

    src = (ROOT / "notebooks" / "01_residuals.md").read_text(encoding="utf-8")
    cells = nbformat.read(exported / "01_residuals_learner.ipynb", as_version=4).cells
    fold = next(i for i, c in enumerate(cells) if P.answer_class("01.depth-std") in c.source
                and "nl-discussion" not in c.source)
    m = DISCUSSION.match(cells[fold + 1].source)
    assert m and m.group(1) == P.answer_class("01.depth-std") and "几乎为零" in m.group(2)
    assert m.group(2) in src
    solution = nbformat.read(exported / "01_residuals.ipynb", as_version=4).cells
    assert not any("nl-discussion" in c.source for c in solution)
    wrapped = 0
    for f in exported.glob("*.ipynb"):
        for c in nbformat.read(f, as_version=4).cells:
            if "nl-discussion" in c.source:
                m = DISCUSSION.match(c.source)
                assert m and not re.search(r"^#{1,6} ", m.group(2), re.M) and "**先想一想**" not in m.group(2), f.name
                wrapped += 1
    assert wrapped >= 20


def test_every_discussion_up_to_the_next_heading_waits_for_the_guess(exported):
    """A discussion that goes on after a figure or table cell of the result (the fresh prompt-region
    review found 03 §3 "…按 1/L 缩小…", 04 §5 "一定更慢", 06 §3-4, 07 §3 shown before the guess) is locked
    too: every markdown cell after an answer fold, up to the next heading or prompt, is a discussion fold;
    and every code cell there (a figure, a table, the checks of the result) is collapsed like the
    experiment: its code can state the answer (this session's review: 01 §2's `predicted = sqrt(0.5) * …`
    and 02 §4.1's checks, moved below the fold, were in view before the guess)."""
    import nbformat

    seen, shut = set(), 0
    for f in sorted(exported.glob("*_learner.ipynb")):
        after = False
        for c in nbformat.read(f, as_version=4).cells:
            if c.cell_type == "code":
                if after:
                    assert (c.metadata.get("jupyter", {}).get("source_hidden")
                            and c.source.startswith(P.HIDDEN_LINE + "\n")), (f.name, c.source[:120])
                    shut += 1
                continue
            text = c.source
            if "nl-answer-for" in text and "nl-discussion" not in text:
                after = not re.search(r"</details>\s*\S", text)
            elif re.search(r"^#{1,6} ", text, re.M) or "**先想一想**" in text:
                if after:   # the discussion must not share a cell with the heading (it would stay in view)
                    first = min(m.start() for m in (re.search(r"^#{1,6} ", text, re.M), re.search(r"\*\*先想一想\*\*", text)) if m)
                    assert not re.sub(r"<!--.*?-->", "", text[:first], flags=re.S).strip(), (f.name, text[:160])
                after = False
            elif after:
                assert DISCUSSION.match(text), (f.name, text[:120])
                seen.add(f.name)
    assert {"03_layernorm_learner.ipynb", "04_rmsnorm_learner.ipynb", "06_placement_learner.ipynb"} <= seen
    assert shut >= 10
    four = (exported / "04_rmsnorm_learner.ipynb").read_text(encoding="utf-8")
    assert "一定更慢" not in four.split("nl-discussion")[0]


def test_an_erratum_after_a_prompt_is_its_own_item_not_the_prompts_discussion(exported):
    """09's errata after A1's and A3's prompts (A2, A4-A8) are items of their own, each under its own
    heading: in the learners' copy (09 has no exercises: one copy) none is locked as the discussion of the prompt before it, and their
    code cells stay open (a reviewer found A4-A8 shut until A3's guess while the items were bold lines)."""
    import nbformat

    cells = nbformat.reads((exported / "09_companion.ipynb").read_text(encoding="utf-8"), as_version=4).cells
    for item in ("A2", "A4", "A5", "A6", "A7", "A8"):
        i = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and f"{item} · [" in c.source)
        assert "nl-discussion" not in cells[i].source and f"#### {item} · [" in cells[i].source, item
        code = next(c for c in cells[i + 1:] if c.cell_type == "code")
        assert not code.source.startswith(P.HIDDEN_LINE), (item, code.source[:80])


def test_summary_shows_an_answer_only_for_a_guessed_prompt(tmp_path, monkeypatch):
    monkeypatch.setenv("NORMLAB_PREDICTIONS", str(tmp_path / "p.json"))
    from normlab.widgets import predict

    P.save_guess("06", "warmup", "A")                         # wrong: the answer is (B)
    rows = {r["id"]: r for r in P.score("06", P.load_guesses())}
    assert rows["warmup"]["answer"] == "B" and rows["pre-ln-stream"]["answer"] == ""
    caption = predict.summary("06").caption()
    assert "warmup: 你的预测 A，答案 B，错 wrong" in caption
    for e in P.entries("06"):
        if e["id"] != "warmup":
            assert f"{e['id']}: 没有预测 (no guess)" in caption and f"{e['id']}: 你的预测" not in caption


@pytest.fixture
def kernel(tmp_path):
    """A real ipykernel (the learner's JupyterLab runs one) with the guesses in tmp_path, started without
    NORMLAB_PREDICT_WAIT (as a learner's): yields (manager, client, store)."""
    import os

    from jupyter_client.manager import KernelManager

    store = tmp_path / "predictions.json"
    env = {k: v for k, v in os.environ.items() if k != P.WAIT_ENV}
    env.update(NORMLAB_PREDICTIONS=str(store), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield km, kc, store
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def until(kc, want, timeout: float = 30.0) -> list[dict]:
    """iopub messages until ``want(msg)``; all of them (a timeout fails)."""
    import queue
    import time

    seen, t0 = [], time.time()
    while time.time() - t0 < timeout:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(msg)
        if want(msg):
            return seen
    raise AssertionError(f"not seen within {timeout} s: {[m['msg_type'] for m in seen]}")


def text_of(msg) -> str:
    c = msg["content"]
    return c.get("text", "") or c.get("data", {}).get("text/plain", "") or "\n".join(c.get("traceback", []))


def reply(kc, msg_id: str, timeout: float) -> dict | None:
    import queue
    import time

    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            r = kc.get_shell_msg(timeout=0.1)
        except queue.Empty:
            continue
        if r["parent_header"].get("msg_id") == msg_id:
            return r
    return None


def test_learner_choice_cell_waits_for_the_pick_and_runs_on(kernel):
    """Run All in a real kernel: the learner copy's choice cell draws the widget and one line and keeps
    running; the next cell waits behind it; the front-end's pick (the comm message anywidget sends)
    reaches the kernel meanwhile, is saved, and the run goes on. Re-run with the guess saved, it does
    not wait. An interrupt ends a wait with one line and stops the run; NORMLAB_PREDICT_WAIT=0 (the
    runners) never waits. (~2 s of CPU: one kernel.)"""
    from normlab.widgets import predict

    km, kc, store = kernel
    ask = kc.execute(P.learner_ask_source("01", "depth-std"))
    after = kc.execute("print('the experiment ran')")
    seen = until(kc, lambda m: m["msg_type"] == "display_data" and predict.WAITING in text_of(m))
    (comm,) = [m["content"]["comm_id"] for m in seen if m["msg_type"] == "comm_open"
               and m["content"]["data"].get("state", {}).get("spec", {}).get("key") == "01.depth-std"]
    assert reply(kc, ask, 1.0) is None and not store.exists()          # still waiting, the next cell too
    assert not any("the experiment ran" in text_of(m) for m in seen)
    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm, "data": {
        "method": "update", "state": {"controls": {"choice": "B"}}, "buffer_paths": []}}))
    seen = until(kc, lambda m: "the experiment ran" in text_of(m))
    assert any(predict.RUNNING_ON.format(choice="B") in text_of(m) for m in seen if m["msg_type"] == "update_display_data")
    assert reply(kc, ask, 10)["content"]["status"] == "ok"
    assert json.loads(store.read_text(encoding="utf-8"))["guesses"]["01.depth-std"]["choice"] == "B"
    again = kc.execute(P.learner_ask_source("01", "depth-std"))            # answered: no wait
    assert reply(kc, again, 10)["content"]["status"] == "ok"
    # an interrupt while waiting: one line, no traceback; the queued cell does not run
    ask = kc.execute(P.learner_ask_source("01", "typical-gain"))
    after = kc.execute("print('must not run')")
    until(kc, lambda m: m["msg_type"] == "display_data" and predict.WAITING in text_of(m))
    km.interrupt_kernel()
    r = reply(kc, ask, 10)
    assert r["content"]["status"] == "error" and r["content"]["ename"] == "PredictionPending"
    seen = until(kc, lambda m: m["msg_type"] == "error")
    assert seen[-1]["content"]["traceback"] == [predict.INTERRUPTED]
    assert reply(kc, after, 10)["content"]["status"] == "aborted"
    # a runner's setting: draws the widget, waits for nothing, saves nothing
    done = kc.execute(f"import os; os.environ['{P.WAIT_ENV}'] = '0'\n" + P.learner_ask_source("01", "lesion"))
    assert reply(kc, done, 10)["content"]["status"] == "ok"
    assert set(json.loads(store.read_text(encoding="utf-8"))["guesses"]) == {"01.depth-std"}
