"""The slides' layout: one idea per slide (issue 18), the splitting rules.

The executed notebook is laid out as a reveal.js deck that reads well projected at 1280x720:
at most SLIDE_PROSE of visible prose (a list of short items apart: SLIDE_LIST) and SLIDE_CODE lines of code
per slide, content kept within the slide's height (tools/slide_model.py; Chromium: tests/test_browser_book.py),
each "先想一想" question on screen before its answer (the experiment's output and the <details> answer
are reveal fragments), training progress bars as their final text, and each lesson's 面试要点 as its
summary slide. What does not fit goes to the slide's speaker notes (press S). Only the executed copy
changes. ``slide_types(nb)`` is the entry point; tests/test_slides.py runs it on synthetic notebooks.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slide_cuts import (cut_prose, cut_row, next_input_height, point_to_figures, sentences,  # noqa: E402,F401
                        short_list_items, split_answer, split_table, without_commits)
from slide_model import (ANSWER, CODE_CUT, CODE_HEAD, CODE_LINE, CODE_PAD, FENCED_WIDTH, OUTPUT_CUT, OUTPUT_MAX,  # noqa: E402
                         PREDICT_TAG, QUESTION, SLIDE_CODE, SLIDE_LIST, SLIDE_PROSE, SLIDE_ROOM, SLIDE_TEXT, SUMMARY_HEADING,
                         SUMMARY_TITLE, TABLE_MAX, choices_height, code_block_rows, code_head, code_lines, join_units, markdown_units,
                         output_chars, output_height, prose_length, shown_code, shows_alone, strip_tags,
                         table_height, text_chars, unit_height, unit_prose, unit_text, visible_prose)


def slide_outputs(cell) -> list:
    """The outputs worth showing: not the float a cell's last ``expect(...)`` returns, not empty text."""
    outputs = list(cell.get("outputs", []))
    last = cell.source.rstrip().split("\n")[-1] if cell.source.strip() else ""
    if outputs and outputs[-1].get("output_type") == "execute_result" and \
            re.match(r"\s*(expect|measure)\(", last) and set(outputs[-1].get("data", {})) == {"text/plain"}:
        outputs = outputs[:-1]
    return [o for o in outputs if (o.get("text", "").strip() if o.get("output_type") == "stream" else True)]


class SlideLayout:
    """Lays cells out on slides within the limits, in order: markdown is split into units that are
    packed greedily; a slide that is full continues on a sub-slide titled "<section>（续）"."""

    def __init__(self) -> None:
        self.cells: list = []
        self.units: list[tuple[str, str]] = []    # markdown waiting to become one cell
        self.notes: list[str] = []                 # the current slide's speaker notes
        self.title = ""                            # the current section's heading
        self.next_type: str | None = "slide"       # slide_type of the current slide's first cell
        self.prose, self.lines, self.height, self.listed = 0.0, 0, 0.0, 0.0   # listed: short lists' prose
        self.text = 0                              # characters on screen (SLIDE_TEXT)
        self.texts: list[int] = []                 # the characters of each slide made
        self.content = False                       # anything but its title on the current slide
        self.fresh_after = False                   # the next content starts a new sub-slide
        self.sizes: list[tuple[float, int, float]] = []   # (prose, code lines, height) of each slide made
        self.first = 0                             # index in self.cells of the current slide's first cell

    # -- the current slide
    def fits(self, prose: float = 0, code: int = 0, height: float = 0, text: int = 0, listed: float = 0) -> bool:
        return (self.prose + prose <= SLIDE_PROSE and self.lines + code <= SLIDE_CODE and self.listed + listed <= SLIDE_LIST
                and self.height + height <= SLIDE_ROOM and self.text + text <= SLIDE_TEXT)

    def started(self) -> bool:
        """More than its title on the slide: what does not fit goes to the next one."""
        return self.content

    def new(self, kind: str = "subslide", title: str | None = None) -> None:
        """Start a slide; a sub-slide that opens without a heading repeats the section's title."""
        if len(self.cells) == self.first and all(t.endswith("（续）") for _, t in self.units):
            self.units = []                        # nothing on the slide yet: start it again
        else:
            self.finish()
        self.first = len(self.cells)
        self.prose, self.lines, self.height, self.content = 0.0, 0, 0.0, False
        self.text, self.listed = 0, 0.0
        self.next_type = kind
        self.fresh_after = False
        if title is None and self.title:
            self.take("heading", f"#### {self.title}（续）", content=False)

    def finish(self) -> None:
        """End the current slide: its markdown, then its notes (one cell)."""
        self.flush()
        self.close_notes()
        if len(self.cells) > self.first:
            self.sizes.append((self.prose, self.lines, self.height))
            self.texts.append(self.text)

    def take(self, kind: str, text: str, content: bool = True, listed: bool = False) -> None:
        self.units.append((kind, text))
        self.listed += unit_prose(kind, text) if listed else 0
        self.prose += 0 if listed else unit_prose(kind, text)
        self.text += unit_text(kind, text)
        self.lines += code_lines(kind, text)
        self.height += unit_height(kind, text)
        self.content = self.content or content

    def flush(self) -> None:
        units, self.units = self.units, []
        if units:
            self.emit(nbformat.v4.new_markdown_cell(join_units(units)))

    def emit(self, cell, fragment: bool = False) -> None:
        if fragment and self.next_type:
            # A fragment cannot open a slide: the title comes first, and the content is not a fragment
            # (a step that shows the title alone before its figure or answer, issue 28 item 11): going to
            # this slide is what reveals it; its question was on the slide before.
            self.emit(nbformat.v4.new_markdown_cell(f"#### {self.title}（续）"))
            fragment = False
        cell.metadata.setdefault("slideshow", {})["slide_type"] = self.next_type or ("fragment" if fragment else "-")
        self.next_type = None
        self.cells.append(cell)

    def close_notes(self) -> None:
        """All the slide's notes in one cell: reveal's speaker view shows a slide's first note only."""
        if self.notes:
            note = nbformat.v4.new_markdown_cell("\n\n---\n\n".join(self.notes))
            note.metadata["slideshow"] = {"slide_type": "notes"}
            self.cells.append(note)
            self.notes = []

    def before_content(self) -> None:
        if self.fresh_after:
            self.new()

    def overflow(self) -> None:
        """The slide is full: go on on the next; a lead-in paragraph that ends in a colon goes along
        with what it introduces."""
        lead = self.units[-1] if self.units and self.units[-1][0] == "para" else None
        if lead and re.search(r"[：:]\s*$", visible_prose(lead[1])) and (
                len(self.cells) > self.first or any(k != "heading" for k, _ in self.units[:-1])):
            self.units.pop()
            self.prose -= unit_prose(*lead)
            self.text -= unit_text(*lead)
            self.height -= unit_height(*lead)
        else:
            lead = None
        self.new()
        if lead:
            self.take(*lead)

    # -- markdown
    def markdown(self, source: str, question_ahead: float = 0) -> None:
        short = short_list_items(units := markdown_units(source))
        for i, (kind, text) in enumerate(units):
            if kind == "heading":
                level = len(text) - len(text.lstrip("#"))
                title = text.lstrip("#").strip()
                if SUMMARY_HEADING.match(text):
                    title = SUMMARY_TITLE
                    text = "#" * level + " " + title
                if level <= 3:
                    self.title = title
                    self.new("slide" if level <= 2 else "subslide", title=title)
                    self.take(kind, text, content=False)
                    continue
            self.before_content()
            if i in short:             # an item of a short list: its prose counts apart (SLIDE_LIST)
                if not self.fits(0, 0, unit_height(kind, text), unit_text(kind, text), unit_prose(kind, text)) and self.started():
                    self.overflow()
                self.take(kind, text, listed=True)
                continue
            prose, height = unit_prose(kind, text), unit_height(kind, text)
            extra = question_ahead if kind == "para" and QUESTION.match(text) else 0
            if not self.fits(prose, code_lines(kind, text), height + extra, unit_text(kind, text)):
                if self.started():
                    self.overflow()
                if kind == "table" and not self.fits(prose, 0, height, unit_text(kind, text)):
                    self.table(text)
                    continue
                if kind in ("para", "item", "quote") and not self.fits(prose):
                    self.notes.append(text)
                    text = self.cut(kind, text)
                if kind == "code" and not self.fits(0, code_lines(kind, text)):
                    self.notes.append(text)
                    lines = text.split("\n")
                    head = code_head(lines[1:-1], CODE_HEAD, FENCED_WIDTH)
                    text = "\n".join(lines[:1] + head + [CODE_CUT, lines[-1]])
            self.take(kind, text)

    def cut(self, kind: str, text: str) -> str:
        room = SLIDE_PROSE - self.prose
        if kind == "quote":
            inner = "\n".join(re.sub(r"^> ?", "", line) for line in text.split("\n"))
            return "\n".join("> " + line for line in cut_prose(inner, room).split("\n"))
        return cut_prose(text, room)

    def table(self, text: str) -> None:
        """A table too long for one slide: its rows on consecutive sub-slides, the header repeated;
        a row too long for a slide of its own shows its longest cell cut (the row goes to the notes)."""
        lines = text.strip().split("\n")
        head, chunk = lines[:2], []
        size = lambda rows: (prose_length("\n".join(head + rows)), 0, unit_height("table", "\n".join(head + rows)),
                             unit_text("table", "\n".join(head + rows)))
        for row in lines[2:]:
            if not self.fits(*size(chunk + [row])):
                if chunk:
                    self.take("table", "\n".join(head + chunk))
                    self.new()
                    chunk = []
                if not self.fits(*size([row])):
                    self.notes.append("\n".join(head + [row]))
                    row = cut_row(row, SLIDE_PROSE - self.prose - prose_length("\n".join(head)))
            chunk.append(row)
        self.take("table", "\n".join(head + chunk))

    # -- a question's answer
    def answer(self, source: str) -> None:
        """The <details> answer to a question: a fragment after the results, closed until opened.
        Its height counts open (the teacher opens it on the slide)."""
        height = unit_height("details", source)
        if not self.fits(0, 0, height, unit_text("details", source)):
            self.new()
        self.flush()
        self.height += height
        self.text += unit_text("details", source)
        self.prose += unit_prose("details", source)
        self.emit(nbformat.v4.new_markdown_cell(source), fragment=self.content)   # on a new slide: no title-alone step
        self.fresh_after = True        # what follows the answer is the next idea

    def text_head(self, out):
        """A text output with more characters than a slide shows (SLIDE_TEXT, less a title): its first
        lines and OUTPUT_CUT; the whole text goes to the notes."""
        data = out.get("data", {})
        if "text/markdown" in data and set(data) <= {"text/markdown", "text/plain"}:
            return self.markdown_head(out)
        if out.get("output_type") != "stream" and set(data) != {"text/plain"}:
            return out
        text = output_text(out)
        if text_chars(text) <= SLIDE_TEXT - 60:
            return out
        lines = text.rstrip("\n").split("\n")
        while lines and text_chars("\n".join(lines) + OUTPUT_CUT) > SLIDE_TEXT - 60:
            lines.pop()
        self.notes.append("完整输出 (full output)：\n\n```text\n" + text.rstrip("\n") + "\n```")
        return nbformat.v4.new_output("stream", name="stdout", text="\n".join(lines + [OUTPUT_CUT]) + "\n")

    def markdown_head(self, out):
        """A markdown output (a listing: a heading line and a code block) with more characters than a
        slide shows: its units while they fit, a code block cut to its first lines and CODE_CUT."""
        md = "".join(out["data"]["text/markdown"])
        room = SLIDE_TEXT - 60
        if output_chars(out) <= room:
            return out
        kept, used = [], 0
        for kind, text in markdown_units(md):
            if used + unit_text(kind, text) <= room:
                kept.append((kind, text))
                used += unit_text(kind, text)
                continue
            if kind == "code":
                lines = text.split("\n")
                body = lines[1:-1]
                while body and used + text_chars("\n".join(body + [CODE_CUT])) > room:
                    body.pop()
                kept.append((kind, "\n".join(lines[:1] + body + [CODE_CUT, lines[-1]])))
            break
        self.notes.append("完整输出 (full output)：\n\n" + md)
        return nbformat.v4.new_output("display_data", data={"text/markdown": join_units(kept), "text/plain": ""})

    # -- a prompt's choices
    def choices(self, cell) -> None:
        """The choice widget under a 先想一想 question: on the question's slide, shown with it (choosing is
        part of the question, not a step of its answer; the question reserved its height)."""
        height = choices_height(cell.source)
        self.before_content()
        if not self.fits(0, 0, height) and self.started():
            self.overflow()
        self.flush()
        shown = nbformat.v4.new_code_cell("")
        shown.metadata["tags"] = ["slides-hide-input", PREDICT_TAG]
        shown.outputs = slide_outputs(cell)
        self.emit(shown)
        self.height += height
        self.content = True

    # -- an exercise's answer (tools/slides.py mark_exercises)
    def exercise(self, cell, learner: str, question: bool) -> None:
        """A cell that holds an exercise's answer: the slide shows what the learners have (the learner
        version of its source, no output: while they work, the reference code and "通过 PASSED" stay
        off the screen); the reference answer and its check's result go to the speaker notes."""
        if learner.strip():
            shown = nbformat.v4.new_code_cell(learner)
            shown.metadata.update({k: v for k, v in cell.metadata.items() if k != "normlab_learner"})
            self.code(shown, question)
        note = "参考答案 (reference answer)：\n\n```python\n" + cell.source.rstrip() + "\n```"
        result = "\n".join(output_text(o) for o in slide_outputs(cell)).strip()
        if result:
            note += "\n\n参考答案的检查结果 (its check)：\n\n```text\n" + result + "\n```"
        self.notes.append(note)

    # -- code
    def code(self, cell, question: bool) -> None:
        """The input (at most SLIDE_CODE lines shown), then each output; after a question the outputs
        are one fragment per slide. A cell that draws a figure or shows a widget shows that only (large)."""
        outputs = slide_outputs(cell)
        for out in [o for o in outputs if REFERENCE_PASSED in output_text(o)]:   # a check on the reference answer
            outputs.remove(out)
            self.notes.append("参考答案的检查结果 (the check on the reference answer)：\n\n```text\n" + output_text(out).strip() + "\n```")
        for out in [o for o in outputs if output_text(o).startswith(SETUP_BANNER)]:    # the seed and threads: notes
            outputs.remove(out)
            self.notes.append("```text\n" + output_text(out).strip() + "\n```")
        figure = any(shows_alone(o) for o in outputs)
        self.before_content()
        if cell.source.strip() and not figure and "slides-hide-input" not in cell.metadata.get("tags", []):
            shown = shown_code(cell.source)
            rows = code_block_rows(shown)               # a wrapped line counts the rows it takes
            height = CODE_LINE * rows + CODE_PAD
            chars = text_chars("\n".join(shown))
            if not self.fits(0, rows, height, chars) and self.started():
                self.overflow()
            if chars > SLIDE_TEXT - self.text:          # more characters than a slide shows: its head
                shown = code_head(shown[:-1] if shown[-1] == CODE_CUT else shown, CODE_HEAD)
                while shown and text_chars("\n".join(shown + [CODE_CUT])) > SLIDE_TEXT - self.text:
                    shown = shown[:-1]
                shown += [CODE_CUT]
                rows, chars = code_block_rows(shown), text_chars("\n".join(shown))
                height = CODE_LINE * rows + CODE_PAD
            self.flush()
            code = nbformat.v4.new_code_cell("\n".join(shown))
            code.metadata.update({k: v for k, v in cell.metadata.items() if k != "slideshow"})
            self.emit(code)
            self.lines += rows
            self.height += height
            self.text += chars
            self.content = True
            if shown[-1:] == [CODE_CUT]:
                self.notes.append("完整代码 (full code)：\n\n```python\n" + cell.source.rstrip() + "\n```")
        first = True
        for out in [piece for out in outputs for piece in split_table(without_commits(out, self.notes), TABLE_MAX - 20)]:
            out = self.text_head(out)
            height, chars = output_height(out), output_chars(out)
            if not self.fits(0, 0, height, chars) and self.started():
                self.new()
                first = True
            self.flush()
            shown = nbformat.v4.new_code_cell("")
            shown.metadata["tags"] = ["slides-hide-input"]
            shown.outputs = [out]
            self.emit(shown, fragment=question and first and self.content)   # on a new slide: no title-alone step
            self.height += height
            self.text += chars
            self.content = True
            first = False


# What a passing check (normlab.exercises, normlab.drills) says: on the slides the reference answer's
# "通过 PASSED" is for the speaker view only; while the class works, the screen shows the exercise.
REFERENCE_PASSED = "通过 PASSED"
# normlab.setup()'s line (seed, threads; normlab/env.py): for the speaker, not a slide of its own in every deck.
SETUP_BANNER = "normlab: 随机种子 seed ="


def output_text(out) -> str:
    """An output as plain text (for the speaker notes)."""
    text = out.get("text", "") if out.get("output_type") == "stream" else out.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


def slide_types(nb: nbformat.NotebookNode) -> SlideLayout:
    """Lay the executed notebook out as slides (SlideLayout): nb.cells become the slides' cells, each
    with its ``slideshow.slide_type``; the source's speaker notes join their slide's notes. Returns the
    layout (its ``sizes``: the estimated prose, code lines and height of each slide)."""
    layout = SlideLayout()
    question = False        # between a 先想一想 question and its <details> answer
    for i, cell in enumerate(nb.cells):
        kind = cell.metadata.get("slideshow", {}).get("slide_type")
        if kind in ("notes", "skip"):
            if kind == "notes":
                layout.notes.append(cell.source)
            continue
        if "normlab_learner" in cell.metadata and cell.cell_type == "code":
            layout.exercise(cell, cell.metadata["normlab_learner"], question)
            continue
        if "normlab_learner" in cell.metadata:        # markdown: the answer to the notes, the rest as markdown
            layout.notes.append("参考答案 (reference answer)：\n\n" + cell.source)
            cell = nbformat.v4.new_markdown_cell(cell.metadata["normlab_learner"])
            if not cell.source.strip():
                continue
        if cell.cell_type == "markdown" and question and ANSWER.match(cell.source):
            answer, rest = split_answer(cell.source)
            layout.answer(answer)
            question = False
            if rest.strip():              # what the cell says after the answer (an erratum): the next idea
                layout.markdown(rest.strip("\n"))
        elif cell.cell_type == "markdown":
            if re.match(r"\s*#{1,3}\s", cell.source):
                question = False          # a new section: the open question had no answer block
            asks = any(QUESTION.match(text) for k, text in markdown_units(cell.source) if k == "para")
            layout.markdown(cell.source, question_ahead=next_input_height(nb.cells, i) if asks else 0)
            question = question or asks
        elif cell.cell_type == "code" and PREDICT_TAG in cell.metadata.get("tags", []):
            layout.choices(cell)
        elif cell.cell_type == "code":
            layout.code(cell, question)
    layout.finish()
    nb.cells = layout.cells
    point_to_figures(nb.cells)
    return layout
