"""The slides' layout (tools/book.py: slide_types and its helpers), without a browser: one idea per
slide within the limits (a line of code that wraps counts the rows it takes), a question's answer only
as fragments after it, progress bars as their final text, a summary slide per lesson, the speaker notes
in one place per slide, each line of code a block that wraps with a hanging indent. Run on small synthetic
notebooks and on the executed course notebooks (build/executed/, made by `tools/book.py slides`;
tests/test_browser_book.py measures the same decks in Chromium)."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import execution  # noqa: E402  (tools/execution.py: build/executed/)
import slide_cuts as cuts  # noqa: E402  (short lists)
import slide_layout as layout  # noqa: E402  (the splitting rules)
import slide_model as model  # noqa: E402  (the text-height model)
import slide_style as style  # noqa: E402  (the slides' CSS)
import slides as decks  # noqa: E402  (tools/slides.py: the decks)
import static_outputs as static  # noqa: E402  (widget outputs made static)

COURSE = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))]
LESSONS_WITH_SUMMARY = {"01_residuals", "02_batchnorm", "03_layernorm", "04_rmsnorm", "05_deepnorm",
                        "06_placement", "07_beyond", "09_companion"}


# --- helpers -----------------------------------------------------------------------------------------

def md(source: str, **slideshow) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source)
    if slideshow:
        cell.metadata["slideshow"] = slideshow
    return cell


def code(source: str, *outputs) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = list(outputs)
    return cell


def text(s: str):
    return nbformat.v4.new_output("stream", name="stdout", text=s)


def table(rows: int, caption: str = "结果") -> nbformat.NotebookNode:
    body = "".join(f"<tr><td>第 {i} 行的名字</td><td>{i / 7:.3f}</td></tr>" for i in range(rows))
    html = f"<table><caption>{caption}</caption><thead><tr><th>名字</th><th>值</th></tr></thead><tbody>{body}</tbody></table>"
    return nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": caption})


def png(width: int, height: int) -> str:
    """The start of a PNG file (signature and IHDR: all the layout reads), base64."""
    import base64
    import struct
    return base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", width, height) + bytes(17)).decode()


def notebook(*cells, widgets: dict | None = None) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=list(cells))
    if widgets is not None:
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json":
                                  {"state": widgets, "version_major": 2, "version_minor": 0}}
    return nb


def lay_out(nb: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, layout.SlideLayout]:
    """What slides_html does before nbconvert exports the deck."""
    nb = copy.deepcopy(nb)
    static.static_widgets(nb)
    return nb, layout.slide_types(nb)


def slides(nb: nbformat.NotebookNode) -> list[list]:
    """The laid-out cells grouped by slide (a slide or sub-slide starts a group)."""
    groups: list[list] = []
    for cell in nb.cells:
        kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if kind in ("slide", "subslide") or not groups:
            groups.append([])
        groups[-1].append(cell)
    return groups


def kind(cell) -> str:
    return cell.metadata.get("slideshow", {}).get("slide_type", "-")


def shown_input(cell) -> bool:
    return cell.cell_type == "code" and "slides-hide-input" not in cell.metadata.get("tags", []) and bool(cell.source.strip())


def prose(slide: list) -> float:
    """Visible prose of a slide with every fragment shown and every <details> closed (short lists apart)."""
    return sum(cuts.slide_prose(model.markdown_units(c.source))[0] for c in slide if c.cell_type == "markdown" and kind(c) != "notes")


def listed(slide: list) -> float:
    """Prose of the short lists on a slide (model.SLIDE_LIST)."""
    return sum(cuts.slide_prose(model.markdown_units(c.source))[1] for c in slide if c.cell_type == "markdown" and kind(c) != "notes")


def code_lines(slide: list) -> int:
    """Rows of code a slide shows: a line that wraps counts each of its rows."""
    lines = sum(model.code_block_rows(c.source.rstrip().split("\n")) for c in slide if shown_input(c))
    return lines + sum(model.code_lines(k, t) for c in slide if c.cell_type == "markdown" and kind(c) != "notes"
                       for k, t in model.markdown_units(c.source))


def is_question(cell) -> bool:
    return cell.cell_type == "markdown" and kind(cell) != "notes" and any(
        k == "para" and model.QUESTION.match(t) for k, t in model.markdown_units(cell.source))


def is_answer(cell) -> bool:
    return cell.cell_type == "markdown" and bool(model.ANSWER.match(cell.source))


def is_choices(cell) -> bool:
    """The cell of a question's choice widget (normlab.course.predictions.PREDICT_TAG)."""
    return cell.cell_type == "code" and "normlab-predict" in cell.metadata.get("tags", [])


def question_problems(nb: nbformat.NotebookNode) -> list[str]:
    """Each 先想一想 question: on its slide outside any fragment, its choices with it (issue 36); every
    output after it until its answer inside a fragment; the <details> answer a fragment of its own,
    closed. On a later slide than the question, the outputs are not fragments, nor the answer when it opens the slide (after its title):
    going to the slide reveals them (issue 28 item 11: no step that shows the title alone)."""
    problems, in_fragment, open_question = [], False, None
    slide_no, asked_on, content = 0, -1, False
    for i, cell in enumerate(nb.cells):
        k = kind(cell)
        if k in ("slide", "subslide"):
            in_fragment, slide_no, content = False, slide_no + 1, False
        elif k == "fragment":
            in_fragment = True
        if k == "notes":
            continue
        opens = slide_no != asked_on and not content      # the first thing on a later slide
        if not (cell.cell_type == "markdown" and re.fullmatch(r"#### [^\n]*（续）", cell.source.strip())):
            content = True
        if cell.cell_type == "markdown" and re.match(r"#{1,3}\s", cell.source) and not cell.source.rstrip().endswith("（续）"):
            open_question = None                       # a new section
        if is_question(cell):
            if in_fragment:
                problems.append(f"cell {i}: the question itself is hidden in a fragment")
            open_question, asked_on = i, slide_no
        elif is_choices(cell):
            if slide_no != asked_on or in_fragment:
                problems.append(f"cell {i}: the choices of the question in cell {open_question} are not shown with it")
        elif open_question is not None and cell.cell_type == "code" and cell.outputs and not in_fragment and slide_no == asked_on:
            problems.append(f"cell {i}: an output after the question in cell {open_question} is on screen before it is revealed")
        elif open_question is not None and is_answer(cell):
            if k != "fragment" and not opens:
                problems.append(f"cell {i}: the answer to cell {open_question} is not a fragment of its own")
            if "<details open" in cell.source:
                problems.append(f"cell {i}: the answer is open")
            open_question = None
    return problems


def check_limits(nb: nbformat.NotebookNode, layout: layout.SlideLayout, name: str) -> None:
    for n, slide in enumerate(slides(nb)):
        where = f"{name} slide {n} ({slide[0].source[:40]!r})"
        assert prose(slide) <= model.SLIDE_PROSE, f"{where}: {prose(slide)} characters of prose"
        assert listed(slide) <= model.SLIDE_LIST, f"{where}: {listed(slide)} characters of short lists"
        assert code_lines(slide) <= model.SLIDE_CODE, f"{where}: {code_lines(slide)} lines of code"
        assert sum(kind(c) == "notes" for c in slide) <= 1, f"{where}: more than one notes cell"
    assert len(layout.sizes) == len(slides(nb)) == len(layout.texts)
    for n, chars in enumerate(layout.texts):      # everything shown, answers opened (issue 28 item 11)
        assert chars <= model.SLIDE_TEXT, f"{name} slide {n}: {chars} characters"
    for n, ((_, _, height), slide) in enumerate(zip(layout.sizes, slides(nb))):
        content = [c for c in slide if kind(c) != "notes" and not c.source.endswith("（续）")]
        widget = len(content) == 1 and any("normlab-web" in "".join(o.get("data", {}).get("text/html", ""))
                                           for o in content[0].get("outputs", []))
        assert height <= model.SLIDE_ROOM or widget, f"{name} slide {n}: estimated {height:.0f} px high"


def progress_widget(state: dict, key: str, desc: str, n: float, total: float, style: str = "success") -> nbformat.NotebookNode:
    """A tqdm.auto bar as ipywidgets saves it: HBox(HTML, FloatProgress, HTML) in the widget state."""
    ids = [f"{key}{part}" for part in ("box", "left", "bar", "right")]
    state[ids[0]] = {"model_name": "HBoxModel", "state": {"children": [f"IPY_MODEL_{i}" for i in ids[1:]]}}
    state[ids[1]] = {"model_name": "HTMLModel", "state": {"value": f"{desc}:\u2007\u200792%"}}    # as last drawn
    state[ids[2]] = {"model_name": "FloatProgressModel", "state": {"value": n, "max": total, "bar_style": style}}
    state[ids[3]] = {"model_name": "HTMLModel", "state": {"value": f"\u2007{n:g}/{total:g}\u2007[00:01&lt;00:00]"}}
    return nbformat.v4.new_output("display_data", data={
        static.WIDGET_MIME: {"model_id": ids[0], "version_major": 2, "version_minor": 0},
        "text/plain": f"{desc}:   0%|          | 0/{total:g}"})


# --- synthetic notebooks -------------------------------------------------------------------------------

PARAGRAPH = "残差连接让梯度有一条不经过子层的路径，深层网络因此能从初始化开始训练。" * 2     # 68 characters


def test_a_long_markdown_cell_is_split_at_paragraphs_and_items():
    source = "## 1. 一节\n\n" + "\n\n".join([PARAGRAPH] * 4) + "\n\n" + "\n".join(f"- 第 {i} 条：{PARAGRAPH}" for i in range(4))
    nb, layout = lay_out(notebook(md("# 标题"), md(source)))
    check_limits(nb, layout, "synthetic")
    groups = slides(nb)
    assert len(groups) >= 5
    shown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown" and kind(c) != "notes")
    assert shown.count(PARAGRAPH) == 8                 # nothing lost, nothing cut
    assert all(f"- 第 {i} 条" in shown for i in range(4))
    continued = [g[0].source for g in groups[2:]]
    assert all(s.startswith("#### 1. 一节（续）") for s in continued), continued


def test_a_list_of_short_questions_shares_its_slide_a_list_with_a_long_item_does_not():
    """Issue 36: 03 opens with a paragraph and five short questions (three slides under the prose limit
    alone). A list whose every item is short counts apart (model.SLIDE_LIST): the five fit on the
    paragraph's slide. The control: the same list with one item longer than SHORT_ITEM is prose, and
    goes on over more slides."""
    intro = "层归一化对每个样本自己求均值和方差，不看 batch 里的其他样本。这一课回答五个问题，每个都用能运行的单元格回答："
    questions = ["LN 到底是哪几行代码？和 `torch.nn.LayerNorm` 逐元素一致吗？",
                 "每个均值/方差覆盖哪些元素？Transformer 里的 LN（只在 E 上）和图像上的 LN（在 C,H,W 上）有什么不同？",
                 "为什么变长、带填充 (padding) 的序列用 LN 而不用 BN？", "LN 对什么变换不变 (invariant)？对什么不是？",
                 "方差怎么算才不出错？ε 放在哪里？BERT 的 ε=1e-12 在半精度下还在吗？"]
    def laid(items):
        nb, lay = lay_out(notebook(md("# 03 · 层归一化\n\n" + intro + "\n\n" + "\n".join(f"{i + 1}. {q}" for i, q in enumerate(items)))))
        check_limits(nb, lay, "synthetic")
        return slides(nb)
    assert all(model.prose_length(q) <= model.SHORT_ITEM for q in questions)
    assert sum(model.prose_length(q) for q in questions) + model.prose_length(intro) > model.SLIDE_PROSE   # the old rule split it
    assert len(laid(questions)) == 1
    long = questions[:1] + [questions[1] + "再说一遍：" + questions[1]] + questions[2:]
    assert model.prose_length(long[1]) > model.SHORT_ITEM and len(laid(long)) >= 2


def test_a_paragraph_longer_than_a_slide_goes_to_the_notes():
    long = "。".join(f"第 {i} 句话说明批归一化在训练和推理时用的统计量不同" for i in range(12)) + "。"   # ~280 characters
    nb, layout = lay_out(notebook(md("# 标题"), md(f"## 一节\n\n{long}")))
    check_limits(nb, layout, "synthetic")
    shown = [c.source for c in nb.cells if c.cell_type == "markdown" and kind(c) != "notes"]
    notes = [c.source for c in nb.cells if kind(c) == "notes"]
    cut = next(s for s in shown if model.PROSE_CUT in s)
    assert "第 0 句" in cut and long not in "".join(shown)
    assert any(long in n for n in notes)               # the whole paragraph, in the slide's notes
    assert slides(nb)[1][-1] is next(c for c in nb.cells if kind(c) == "notes")


def test_a_long_code_cell_shows_its_first_lines_and_the_notes_hold_all_of_it():
    source = "\n".join(f"x{i} = {i}" for i in range(40))
    nb, layout = lay_out(notebook(md("# 标题"), code(source, text("done\n"))))
    check_limits(nb, layout, "synthetic")
    inputs = [c for c in nb.cells if shown_input(c)]
    assert len(inputs) == 1
    lines = inputs[0].source.split("\n")
    assert lines[:model.CODE_HEAD] == source.split("\n")[:model.CODE_HEAD] and lines[-1] == model.CODE_CUT
    assert len(lines) <= model.SLIDE_CODE
    notes = [c.source for c in nb.cells if kind(c) == "notes"]
    assert len(notes) == 1 and source in notes[0]
    assert any(c.outputs and c.outputs[0].get("text") == "done\n" for c in nb.cells if c.cell_type == "code")


def test_a_long_table_is_split_with_its_header_and_tables_in_outputs_too():
    rows = "\n".join(f"| 资料 {i} | 旧值权重写法，m = 0.9 等于 PyTorch 的 0.1 |" for i in range(14))
    nb, layout = lay_out(notebook(md("# 标题"), md(f"## 表\n\n| 资料 | 写法 |\n|---|---|\n{rows}"),
                                  code("show()", table(40))))
    check_limits(nb, layout, "synthetic")
    parts = [c.source for c in nb.cells if c.cell_type == "markdown" and "| 资料 | 写法 |" in c.source]
    assert len(parts) >= 2 and all("|---|---|" in p for p in parts)
    assert sum(len(re.findall(r"\| 资料 \d", p)) for p in parts) == 14
    html = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.outputs if "text/html" in o.get("data", {})]
    assert len(html) >= 2 and all("<thead>" in h for h in html)
    assert sum(h.count("<tr><td>") for h in html) == 40
    assert "（1/" in html[0]


QUESTION = "**先想一想**：batch 只有 2 时，BN 的推理准确率会 (A) 和 batch 32 差不多；(B) 明显更差？"
ANSWER = "<details><summary>答案 (answer)</summary>\n\n**(B)**。两个样本的统计量噪声极大。\n\n</details>"


def question_notebook(*outputs, between=()) -> nbformat.NotebookNode:
    return notebook(md("# 标题"), md("## 一节\n\n先看一个实验。\n\n" + QUESTION),
                    md("讲课提示：先让学员举手投票。", slide_type="notes"),
                    code("acc = run(batch=2)\nprint(acc)", *outputs), *between, md(ANSWER),
                    md("第二个实验之后的正文。"))


@pytest.mark.parametrize("outputs", [
    [text("0.42\n")],
    [table(4), text("0.42\n")],
    [nbformat.v4.new_output("display_data", data={"image/png": png(1100, 390), "text/plain": "<Figure>"}), table(5)],
], ids=["text", "table", "figure"])
def test_a_questions_answers_are_fragments_after_it(outputs):
    nb, layout = lay_out(question_notebook(*outputs))
    check_limits(nb, layout, "synthetic")
    assert question_problems(nb) == []
    cells = nb.cells
    q = next(i for i, c in enumerate(cells) if is_question(c))
    a = next(i for i, c in enumerate(cells) if is_answer(c))
    assert q < a and "<details>" in cells[a].source and "<details open" not in cells[a].source
    out_cells = [c for c in cells[q:a] if c.cell_type == "code" and c.outputs]
    assert sum(len(c.outputs) for c in out_cells) == len(outputs)
    first = cells.index(out_cells[0])
    if any(kind(c) in ("slide", "subslide") for c in cells[q + 1:first + 1]):    # on a slide of its own, after its title
        assert kind(cells[first - 1]) in ("slide", "subslide") and kind(out_cells[0]) == "-"
    else:
        assert kind(out_cells[0]) == "fragment"
    after = next(c for c in cells[a + 1:] if kind(c) != "notes")
    assert kind(after) in ("slide", "subslide")      # the next idea: not inside the answer's fragment
    assert "讲课提示" in next(c.source for c in cells if kind(c) == "notes")


def test_what_follows_an_answer_in_its_cell_is_the_next_idea():
    """An erratum written in the answer's cell, after </details>: not part of the answer's fragment
    (whose prose counts as its summary only), but laid out after it, on a slide of its own."""
    erratum = "> **资料勘误 (errata)**：\n> - **D2** 取 m = 0.9 是旧值权重写法的数字。\n> - **E4** 滑动方差用了有偏估计。"
    nb, layout = lay_out(notebook(md("# 标题"), md("## 一节\n\n" + QUESTION), code("run()", text("1\n")),
                                  md(ANSWER + "\n\n" + erratum)))
    check_limits(nb, layout, "synthetic")
    assert question_problems(nb) == []
    answer = next(c for c in nb.cells if is_answer(c))
    assert answer.source == ANSWER and kind(answer) == "fragment"
    after = [c for c in nb.cells if "资料勘误" in c.source]
    assert len(after) == 1 and kind(after[0]) == "subslide" and after[0].source.endswith(erratum)
    assert nb.cells.index(after[0]) > nb.cells.index(answer)


def test_a_question_without_an_answer_block_does_not_hide_the_next_section():
    nb, _ = lay_out(notebook(md("# 标题"), md("## 一节\n\n" + QUESTION), code("run()", text("1\n")),
                             md("## 二节\n\n正文。"), code("other()", text("2\n"))))
    last = [c for c in nb.cells if c.cell_type == "code" and c.outputs][-1]
    assert last.outputs[0]["text"] == "2\n" and kind(last) != "fragment"
    assert question_problems(nb) == []


def test_progress_bars_become_their_final_text():
    state: dict = {}
    bars = [progress_widget(state, "a", "none lr=0.03", 300, 300), progress_widget(state, "b", "bn lr=1.0", 300, 300),
            progress_widget(state, "c", "train", 57, 400, style="danger")]
    state["slider"] = {"model_name": "IntSliderModel", "state": {"value": 3}}
    slider = nbformat.v4.new_output("display_data", data={static.WIDGET_MIME: {"model_id": "slider"}, "text/plain": "IntSlider"})
    nb, _ = lay_out(notebook(md("# 标题"), code("train()", *bars, text("done\n")), code("interact(f)", slider),
                             widgets=state))
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    progress = [o for o in outputs if "normlab-progress" in o.get("data", {}).get("text/html", "")]
    assert len(progress) == 1                                   # consecutive bars: one block
    lines = progress[0]["data"]["text/plain"].split("\n")
    assert lines == ["none lr=0.03: 100% 300/300", "bn lr=1.0: 100% 300/300", "train: 14% 57/400（中断 interrupted）"]
    assert not any(static.WIDGET_MIME in o.get("data", {}) for o in outputs)
    assert sum(static.WIDGET_NOTE == o.get("data", {}).get("text/html") for o in outputs) == 1   # the slider: the note
    assert "widgets" not in nb.metadata


def test_the_summary_section_starts_the_summary_slide():
    items = "\n".join(f"- 要点 {i}：{PARAGRAPH}" for i in range(5))
    nb, layout = lay_out(notebook(md("# 标题"), md("## 一节\n\n正文。"), md(f"## 面试要点\n\n{items}"),
                                  md("## 练习 (exercises)\n\n做题。")))
    check_limits(nb, layout, "synthetic")
    summary = [c for c in nb.cells if c.source.startswith(f"## {model.SUMMARY_TITLE}")]
    assert len(summary) == 1 and kind(summary[0]) == "slide"
    assert "面试要点" not in "".join(c.source for c in nb.cells if c.source.startswith("## 面试要点"))
    after = nb.cells[nb.cells.index(summary[0]):]
    assert all(f"要点 {i}" in "".join(c.source for c in after) for i in range(5))


def test_notes_of_one_slide_are_one_cell_and_the_deck_exports():
    nb = question_notebook(text("0.42\n"))
    nb.cells.insert(2, md("讲课提示：第二条提示。", slide_type="notes"))
    laid, _ = lay_out(nb)
    notes = [c for c in laid.cells if kind(c) == "notes"]
    assert len(notes) == 1 and "举手投票" in notes[0].source and "第二条提示" in notes[0].source
    html = decks.slides_html(decks.slides_exporter(), copy.deepcopy(nb))
    assert html.count('<aside class="notes">') == 1
    assert html.count('class="fragment"') == 2                 # the output, the answer
    assert "Reveal.initialize({center: false," in html
    assert "height: 720" in html


LONG_LINE = "y = " + " + ".join(f"weights[{i}] * inputs[{i}]" for i in range(7))     # 176 characters: 2 rows at 20px


def test_code_rows_count_a_wrapped_line_as_the_rows_it_takes():
    columns = int(model.CODE_WIDTH // model.CODE_CHAR)            # characters across a code cell
    assert 100 <= columns <= 110
    assert model.code_rows("") == model.code_rows("x = 1") == 1
    assert model.code_rows("x" * columns) == 1 and model.code_rows("x" * (columns + 1)) == 2   # a word: broken anywhere
    assert len(LONG_LINE) > columns and model.code_rows(LONG_LINE) == 2
    # wrapped at a space: a word that does not fit the row starts the next one, whole
    words = " ".join(["abcdefghi"] * 11)                          # 109 characters, the last word past the row
    assert model.code_rows(words) == 2
    # the rows after the first start CODE_HANG columns right of the line's own indent: fewer fit
    rest = columns - 8 - model.CODE_HANG
    assert model.code_rows(" " * 8 + "a" * 50 + " " + "b" * rest) == 2
    assert model.code_rows(" " * 8 + "a" * 50 + " " + "b" * (rest + 1)) == 3
    assert model.code_rows("a" * 50 + " " + "b" * (rest + 1)) == 2        # no indent: a longer second row
    # Chinese characters are wider than Latin ones
    assert model.code_rows("# " + "归一化" * 24) >= 2 and model.code_rows("# " + "abc" * 24) == 1
    assert model.code_block_rows(["x = 1", LONG_LINE, ""]) == 4
    assert model.code_head(["x = 1", LONG_LINE, "z = 2"], 3) == ["x = 1", LONG_LINE]
    assert model.code_head([LONG_LINE, "z = 2"], 1) == []


def test_a_wrapped_line_counts_its_rows_on_the_slide():
    """The layout counts the rows code takes on screen, for the limit of SLIDE_CODE lines and the height."""
    source = "\n".join(["a = 1"] * 7 + [LONG_LINE] * 3)               # 10 lines, 13 rows
    nb, layout = lay_out(notebook(md("# 标题"), code(source)))
    check_limits(nb, layout, "synthetic")
    assert [c.source for c in nb.cells if shown_input(c)] == [source]
    _, lines, height = layout.sizes[0]
    assert lines == 13 and height >= model.CODE_LINE * 13 + model.CODE_PAD
    # two cells: 8 + 4 lines would share a slide, but the 4 long lines take 8 rows: 16 > SLIDE_CODE
    short, long = "\n".join(f"x{i} = {i}" for i in range(8)), "\n".join([LONG_LINE] * 4)
    nb, layout = lay_out(notebook(md("# 标题"), code(short), code(long)))
    check_limits(nb, layout, "synthetic")
    where = {c.source: n for n, slide in enumerate(slides(nb)) for c in slide if shown_input(c)}
    assert where[long] == where[short] + 1
    assert [lines for _, lines, _ in layout.sizes] == [8, 8]


def test_a_cell_of_long_lines_shows_the_rows_that_fit_and_the_notes_hold_all_of_it():
    source = "\n".join([LONG_LINE] * 12)                                # 12 lines, 24 rows
    nb, layout = lay_out(notebook(md("# 标题"), code(source)))
    check_limits(nb, layout, "synthetic")
    shown = next(c.source for c in nb.cells if shown_input(c)).split("\n")
    # the first lines within CODE_HEAD rows and SLIDE_TEXT characters (six of these lines hold 900)
    assert shown[-1] == model.CODE_CUT and set(shown[:-1]) == {LONG_LINE} and 1 <= len(shown) - 1 <= model.CODE_HEAD // 2
    assert model.code_block_rows(shown) <= model.SLIDE_CODE and model.text_chars("\n".join(shown)) <= model.SLIDE_TEXT
    assert model.text_chars("\n".join(shown + [LONG_LINE])) > model.SLIDE_TEXT or len(shown) - 1 == model.CODE_HEAD // 2
    assert any(source in c.source for c in nb.cells if kind(c) == "notes")


def test_wrapped_code_in_markdown_and_text_outputs_counts_its_rows():
    fenced = f"```python\n{LONG_LINE}\nx = 1\n```"
    assert model.code_lines("code", fenced) == 3
    assert model.unit_height("code", fenced) == model.CODE_LINE * 3 + model.CODE_PAD
    columns = int((model.OUTPUT_WIDTH - model.CODE_WIDE) // model.CODE_CHAR)
    assert model.text_rows("0.5, " * 40) == 3 and model.text_rows("ok\n" + "x" * columns) == 2
    assert model.output_height(text("0.5, " * 40)) == model.CODE_LINE * 3 + 30


def test_each_line_of_highlighted_code_is_a_block_with_its_hanging_indent():
    """wrap_code_lines: one <span class="nl-line"> a line (SLIDE_CSS wraps it with a hanging indent);
    a token that crosses lines (a docstring) is closed and opened again; the text is unchanged."""
    pre = ('<div class="highlight hl-ipython3"><pre><span></span><span class="k">def</span> f():\n'
           '    <span class="sd">"""Two\n    lines."""</span>\n\n    <span class="k">return</span> 1\n</pre></div>')
    out = decks.wrap_code_lines(pre)
    assert out == ('<div class="highlight hl-ipython3"><pre>'
                   '<span class="nl-line" style="--nl-hang: 4ch"><span></span><span class="k">def</span> f():\n</span>'
                   '<span class="nl-line" style="--nl-hang: 8ch">    <span class="sd">"""Two\n</span></span>'
                   '<span class="nl-line" style="--nl-hang: 8ch"><span class="sd">    lines."""</span>\n</span>'
                   '<span class="nl-line" style="--nl-hang: 4ch">\n</span>'
                   '<span class="nl-line" style="--nl-hang: 8ch">    <span class="k">return</span> 1\n</span></pre></div>')
    assert model.strip_tags(out) == model.strip_tags(pre)
    # in a deck: every line of a cell's code, and the CSS that wraps it
    html = decks.slides_html(decks.slides_exporter(), notebook(md("# 标题"), code("def f(x):\n    return x\n\nf(1)")))
    assert html.count('class="nl-line"') == 4 and style.SLIDE_FIT_CSS in html and "white-space: pre-wrap" in style.SLIDE_FIT_CSS


def test_visible_prose_counts_what_a_reader_sees():
    assert model.prose_length("批归一化") == 4
    assert model.prose_length("**BN** 的 `eps`") == 1 + 0.5 * (2 + 3)
    assert model.prose_length("均值 $\\mu = \\frac{1}{m}\\sum x$ 和 [链接](https://example.org/a/very/long/url)") == 6
    assert model.prose_length("<!--rec key 0.1..0.2-->答") == 1
    assert model.prose_length("| 列 | 值 |\n|---|---|\n| 甲 | 1 |") == 3.5


# --- the course's executed notebooks --------------------------------------------------------------------

def executed(folder: Path) -> list[Path]:
    """The course's executed notebooks (this run's nbval records them: the executed_notebooks fixture
    waits for it); skip when there are none (a run without nbval: python tools/book.py execute)."""
    paths = [folder / f"{stem}.ipynb" for stem in COURSE if (folder / f"{stem}.ipynb").exists()]
    if not paths:
        pytest.skip("no executed notebooks in build/executed/ (python tools/book.py execute)")
    return paths


@pytest.mark.parametrize("stem", COURSE)
def test_course_decks_within_limits_with_answers_as_fragments(stem, executed_notebooks):
    path = executed_notebooks / f"{stem}.ipynb"
    if not path.exists():
        pytest.skip(f"{stem} not executed (python tools/book.py execute)")
    source = nbformat.read(path, 4)
    try:                                      # as the build does: the exercises' answers to the notes
        decks.mark_exercises(source, ROOT / "notebooks" / f"{stem}.md")
    except SystemExit as stale:               # the source's exercises changed since this copy was executed
        pytest.skip(str(stale))
    nb, layout = lay_out(source)
    check_limits(nb, layout, path.stem)
    assert question_problems(nb) == [], path.stem
    asked = sum(is_question(c) for c in source.cells)
    assert sum(is_question(c) for c in nb.cells) == asked
    answered = sum(is_answer(c) for c in source.cells)
    # a fragment, or what opens its slide after the title (going to the slide reveals it; still closed)
    assert sum(is_answer(c) and (kind(c) == "fragment" or kind(nb.cells[i - 1]) in ("slide", "subslide"))
               for i, c in enumerate(nb.cells)) == answered
    # the source's speaker notes all reach the deck, one notes cell per slide at most (check_limits)
    notes = "\n".join(c.source for c in nb.cells if kind(c) == "notes")
    for cell in source.cells:
        if kind(cell) == "notes":
            assert cell.source in notes, f"{path.stem}: a speaker note is missing from the slides"


def test_course_progress_bars_are_text_and_lessons_end_with_a_summary_slide(executed_notebooks):
    decks_with_summary, bars = set(), 0
    EXECUTED = executed(executed_notebooks)
    for path in EXECUTED:
        source = nbformat.read(path, 4)
        state = source.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        expected = [static.progress_text(state, o["data"][static.WIDGET_MIME]["model_id"]) for c in source.cells
                    for o in c.get("outputs", []) if static.WIDGET_MIME in o.get("data", {})]
        expected = [t for t in expected if t is not None]
        nb, _ = lay_out(source)
        shown = [line for c in nb.cells if c.cell_type == "code" for o in c.outputs
                 if "normlab-progress" in o.get("data", {}).get("text/html", "")
                 for line in o["data"]["text/plain"].split("\n")]
        assert shown == expected, path.stem
        assert all(re.fullmatch(r".+: \d+% \d+/\d+(（中断 interrupted）)?", line) for line in shown), shown[:3]
        bars += len(shown)
        if any(c.cell_type == "markdown" and kind(c) == "slide" and c.source.startswith(f"## {model.SUMMARY_TITLE}")
               for c in nb.cells):
            decks_with_summary.add(path.stem)
    missing = (LESSONS_WITH_SUMMARY & {p.stem for p in EXECUTED}) - decks_with_summary
    assert not missing, f"no {model.SUMMARY_TITLE} slide in {sorted(missing)}"
    if any(p.stem == "02_batchnorm" for p in EXECUTED):
        assert bars >= 30          # 02 alone trains 32 times


def test_the_setup_line_and_commit_hashes_go_to_the_notes_a_tall_table_fills_its_slides():
    """normlab.setup()'s seed line is no slide of its own; a table citing file@commit shows the files,
    the commits go to the notes (issue 36: 06's model table, half of it hashes); a table alone uses the
    slide below its title (TABLE_MAX), so 22 rows take fewer slides than at the old 400 px."""
    hashed = table(22, caption="模型")
    hashed["data"]["text/html"] = hashed["data"]["text/html"].replace("的名字</td>", "的名字 modeling_x.py @8ec58104</td>")
    nb, _ = lay_out(notebook(md("# 标题"), code("import normlab\nnormlab.setup()", text("normlab: 随机种子 seed = 0（环境变量 NORMLAB_SEED）· torch 线程 threads = 2\n")),
                             md("## 表"), code("show()", hashed)))
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    notes = "\n".join(c.source for c in nb.cells if kind(c) == "notes")
    assert not any("随机种子" in layout.output_text(o) for o in shown) and "随机种子 seed = 0" in notes
    tables = [o["data"]["text/html"] for o in shown if "<table" in o.get("data", {}).get("text/html", "")]
    assert tables and not any("@8ec58104" in t for t in tables) and "modeling_x.py" in tables[0]
    assert notes.count("@8ec58104") == 22
    assert len(tables) < len(layout.split_table(hashed, model.OUTPUT_MAX - 40))
