"""The slides' layout: one idea per slide (issue 18), the splitting rules.

The executed notebook is laid out as a reveal.js deck that reads well projected at 1280x720:
at most SLIDE_PROSE of visible prose and SLIDE_CODE lines of code per slide, content kept within the
slide's height (estimated by tools/slide_model.py; tests/test_browser_book.py measures it in Chromium),
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
from slide_model import (ANSWER, CODE_CUT, CODE_HEAD, CODE_LINE, CODE_PAD, FENCED_WIDTH, OUTPUT_MAX,  # noqa: E402
                         PROSE_CUT, QUESTION, SLIDE_CODE, SLIDE_PROSE, SLIDE_ROOM, SUMMARY_HEADING, SUMMARY_TITLE,
                         code_block_rows, code_head, code_lines, join_units, markdown_units, output_height,
                         prose_length, shown_code, shows_alone, strip_tags, table_height, unit_height, unit_prose,
                         visible_prose)


def sentences(text: str) -> list[str]:
    """Split prose after 。！？； outside inline code and math."""
    out, cur, code, in_math = [], "", False, False
    for ch in text:
        cur += ch
        if ch == "`":
            code = not code
        elif ch == "$" and not code:
            in_math = not in_math
        elif ch in "。！？；" and not code and not in_math:
            out.append(cur)
            cur = ""
    return out + ([cur] if cur.strip() else [])


def cut_prose(text: str, room: float) -> str:
    """The leading sentences of a paragraph that fit in ``room`` together with PROSE_CUT."""
    kept = ""
    for s in sentences(text):
        if prose_length(kept + s + PROSE_CUT) > room:
            break
        kept += s
    if not kept:   # one sentence longer than a slide: cut it between words
        for ch in text:
            if prose_length(kept + ch + PROSE_CUT) > room:
                break
            kept += ch
        kept = re.sub(r"[`$][^`$]*$", "", kept) if (kept.count("`") % 2 or kept.count("$") % 2) else kept
    if kept.count("**") % 2:
        kept += "**"
    return kept.rstrip() + PROSE_CUT


def cut_row(row: str, room: float) -> str:
    """A markdown table row within ``room``: its longest cell cut (cut_prose)."""
    cells = row.strip().strip("|").split("|")
    longest = max(range(len(cells)), key=lambda i: prose_length(cells[i]))
    rest = prose_length(row) - prose_length(cells[longest])
    cells[longest] = " " + cut_prose(cells[longest].strip(), max(room - rest, 0)) + " "
    return "|" + "|".join(cells) + "|"


TABLE_HTML = re.compile(r"\s*<table>(<caption>.*?</caption>)?<thead>(.*?)</thead><tbody>(.*)</tbody></table>\s*", re.S)


def split_table(out, room: float) -> list:
    """A table output (normlab.viz.Table's HTML) taller than ``room``: one output per slide-sized
    run of rows, the header repeated and the caption numbered (1/3, 2/3, ...)."""
    html = out.get("data", {}).get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    m = TABLE_HTML.fullmatch(html)
    if not m or table_height(html) <= room:
        return [out]
    caption, head, body = m.groups()
    title = strip_tags(caption or "")
    table = lambda rows, cap="": f"<table>{cap}<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    chunks: list[list[str]] = [[]]
    for row in re.findall(r"<tr.*?</tr>", body, re.S):
        if chunks[-1] and table_height(table(chunks[-1] + [row], caption or "")) > room:
            chunks.append([])
        chunks[-1].append(row)
    import html as htmllib
    return [nbformat.v4.new_output("display_data", data={"text/html": table(
        rows, f"<caption>{htmllib.escape(title)}（{i}/{len(chunks)}）</caption>")})
        for i, rows in enumerate(chunks, 1)]


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
        self.prose, self.lines, self.height = 0.0, 0, 0.0
        self.content = False                       # anything but its title on the current slide
        self.fresh_after = False                   # the next content starts a new sub-slide
        self.sizes: list[tuple[float, int, float]] = []   # (prose, code lines, height) of each slide made
        self.first = 0                             # index in self.cells of the current slide's first cell

    # -- the current slide
    def fits(self, prose: float = 0, code: int = 0, height: float = 0) -> bool:
        return (self.prose + prose <= SLIDE_PROSE and self.lines + code <= SLIDE_CODE
                and self.height + height <= SLIDE_ROOM)

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

    def take(self, kind: str, text: str, content: bool = True) -> None:
        self.units.append((kind, text))
        self.prose += unit_prose(kind, text)
        self.lines += code_lines(kind, text)
        self.height += unit_height(kind, text)
        self.content = self.content or content

    def flush(self) -> None:
        units, self.units = self.units, []
        if units:
            self.emit(nbformat.v4.new_markdown_cell(join_units(units)))

    def emit(self, cell, fragment: bool = False) -> None:
        if fragment and self.next_type:            # a fragment cannot open a slide: the title comes first
            self.emit(nbformat.v4.new_markdown_cell(f"#### {self.title}（续）"))
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
            self.height -= unit_height(*lead)
        else:
            lead = None
        self.new()
        if lead:
            self.take(*lead)

    # -- markdown
    def markdown(self, source: str, question_ahead: float = 0) -> None:
        for kind, text in markdown_units(source):
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
            prose, height = unit_prose(kind, text), unit_height(kind, text)
            extra = question_ahead if kind == "para" and QUESTION.match(text) else 0
            if not self.fits(prose, code_lines(kind, text), height + extra):
                if self.started():
                    self.overflow()
                if kind == "table" and not self.fits(prose, 0, height):
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
        size = lambda rows: (prose_length("\n".join(head + rows)), 0, unit_height("table", "\n".join(head + rows)))
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
        if not self.fits(0, 0, height):
            self.new()
        self.flush()
        self.height += height
        self.prose += unit_prose("details", source)
        self.emit(nbformat.v4.new_markdown_cell(source), fragment=True)
        self.fresh_after = True        # what follows the answer is the next idea

    # -- code
    def code(self, cell, question: bool) -> None:
        """The input (at most SLIDE_CODE lines shown), then each output; after a question the outputs
        are one fragment per slide. A cell that draws a figure or shows a widget shows that only (large)."""
        outputs = slide_outputs(cell)
        figure = any(shows_alone(o) for o in outputs)
        self.before_content()
        if cell.source.strip() and not figure and "slides-hide-input" not in cell.metadata.get("tags", []):
            shown = shown_code(cell.source)
            rows = code_block_rows(shown)               # a wrapped line counts the rows it takes
            height = CODE_LINE * rows + CODE_PAD
            if not self.fits(0, rows, height) and self.started():
                self.overflow()
            self.flush()
            code = nbformat.v4.new_code_cell("\n".join(shown))
            code.metadata.update({k: v for k, v in cell.metadata.items() if k != "slideshow"})
            self.emit(code)
            self.lines += rows
            self.height += height
            self.content = True
            if shown[-1:] == [CODE_CUT]:
                self.notes.append("完整代码 (full code)：\n\n```python\n" + cell.source.rstrip() + "\n```")
        first = True
        for out in [piece for out in outputs for piece in split_table(out, OUTPUT_MAX - 40)]:
            height = output_height(out)
            if not self.fits(0, 0, height) and self.started():
                self.new()
                first = True
            self.flush()
            shown = nbformat.v4.new_code_cell("")
            shown.metadata["tags"] = ["slides-hide-input"]
            shown.outputs = [out]
            self.emit(shown, fragment=question and first)
            self.height += height
            self.content = True
            first = False


def slide_types(nb: nbformat.NotebookNode) -> SlideLayout:
    """Lay the executed notebook out as slides (SlideLayout): nb.cells become the slides' cells, each
    with its ``slideshow.slide_type``; the source's speaker notes join their slide's notes. Returns the
    layout (its ``sizes``: the estimated prose, code lines and height of each slide)."""
    layout = SlideLayout()
    question = False        # between a 先想一想 question and its <details> answer
    for i, cell in enumerate(nb.cells):
        kind = cell.metadata.get("slideshow", {}).get("slide_type")
        if kind == "notes":
            layout.notes.append(cell.source)
        elif kind == "skip":
            continue
        elif cell.cell_type == "markdown" and question and ANSWER.match(cell.source):
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
        elif cell.cell_type == "code":
            layout.code(cell, question)
    layout.finish()
    nb.cells = layout.cells
    return layout


def split_answer(source: str) -> tuple[str, str]:
    """A markdown cell that starts with a <details> answer: (the answer, the markdown after it)."""
    depth = 0
    for m in re.finditer(r"<details\b|</details>", source):
        depth += -1 if m.group(0) == "</details>" else 1
        if depth == 0:
            return source[:m.end()], source[m.end():]
    return source, ""


def next_input_height(cells, i: int) -> float:
    """The height the code cell after a question will take on the question's slide (its input)."""
    for cell in cells[i + 1:]:
        if cell.cell_type == "code":
            figure = any(shows_alone(o) for o in cell.get("outputs", []))
            return 0 if figure else CODE_LINE * code_block_rows(shown_code(cell.source)) + CODE_PAD
        if cell.metadata.get("slideshow", {}).get("slide_type") != "notes":
            return 0
    return 0
