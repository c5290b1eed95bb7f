"""The slides' text-height model: how much of a 1280x720 slide a piece of markdown, code or an output
takes, measured without a browser (tests/test_browser_book.py measures the same decks in Chromium;
tests/test_slides.py checks the model on its own). The limits of one slide are the first constants;
the px sizes after them come from SLIDE_CSS (tools/slide_style.py): change both together.

Markdown is parsed into units (``markdown_units``: heading, para, item, table, code, math, details,
quote), the pieces tools/slide_layout.py may split a cell at."""

from __future__ import annotations

import math
import re

SLIDE_PROSE = 150     # visible prose per slide: a Chinese character counts 1, any other visible one 1/2
# A list of short items (each <= SHORT_ITEM: a lesson's questions) is scanned, not read: its prose counts
# apart, at most SLIDE_LIST a slide (issue 36; tools/slide_cuts.py short_list_items); height still limits it.
SHORT_ITEM, SLIDE_LIST = 70, 200
SLIDE_CODE = 15       # lines of code per slide
SLIDE_TEXT = 800      # characters (not spaces) a slide shows in all: prose, code, outputs, opened answers
CODE_HEAD = 12        # a longer code cell shows its first lines and CODE_CUT; the full code goes to the notes
CODE_CUT = "# ……（完整代码见讲者备注 / JupyterLab）"
PROSE_CUT = "……（全文见讲者备注）"
OUTPUT_CUT = "……（完整输出见讲者备注）"
SUMMARY_TITLE = "本课小结 · 面试要点"
SUMMARY_HEADING = re.compile(r"^(#{1,3})\s+(?:本课小结\s*·\s*)?面试要点")
QUESTION = re.compile(r"^\s*\*\*先想一想\*\*")
ANSWER = re.compile(r"^\s*<details>\s*<summary>\s*答案")
WIDE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\u3000-\u303f]")
LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,3}[.)])\s")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")

# The height model (px of the 1280x720 slide, measured in Chromium with SLIDE_CSS): what a slide may hold.
SLIDE_ROOM = 630      # of the 720: reveal's margin and the section's padding take the rest
WIDTH = 1150          # px of text across a slide
PROSE_LINE, PROSE_CHARS = 40.6, 38   # 28px prose, line-height 1.45; Chinese characters per line
CODE_LINE, CODE_PAD = 26.0, 33       # 20px code and text outputs, line-height 1.3; a code cell's padding
IMG_WIDTH, IMG_MAX = 1180, 500       # a figure fills the width, at most IMG_MAX high
OUTPUT_MAX = 440      # a longer output scrolls inside a box this high (SLIDE_CSS)
TABLE_MAX = 540       # an output that is a table alone: its box may take the slide below its title (SLIDE_CSS)
WIDGET_HEIGHT = 610   # the axes explorer, the tallest course widget: alone on its slide, under its title
# Nothing is cut at the slide's right edge (SLIDE_CSS): code soft-wraps, a line longer than the slide
# going on below it, CODE_HANG columns right of its own indent (wrap_code_lines); text outputs wrap
# anywhere; a wider table scrolls sideways inside its output box. The layout counts a wrapped line
# of code as the rows it takes on screen, for the limit of SLIDE_CODE lines and for the height.
CODE_CHAR, CODE_WIDE = 12.05, 20.0   # px across a character of 20px monospace code: Latin, Chinese
CODE_WIDTH = 1240     # px of code across a code cell (1262 less the editor's and the <pre>'s padding)
FENCED_WIDTH = 1215   # px of code across a code block in markdown (its cell's padding too)
CODE_HANG = 4         # the rows a long line wraps to start this many columns right of its indent
OUTPUT_WIDTH = 1110   # px of a text output's row (90% of its box; it wraps anywhere)
TABLE_PX = 20         # px of an output table's text (SLIDE_CSS)


def visible_prose(md: str) -> str:
    """The text of a piece of markdown that a reader sees as prose: without markup, HTML comments,
    code blocks, math (typeset, not read as text) and URLs."""
    t = re.sub(r"<!--.*?-->", "", md, flags=re.S)
    t = re.sub(r"^\s*(`{3,}|~{3,}).*?^\s*\1", "", t, flags=re.S | re.M)
    t = re.sub(r"\$\$.*?\$\$", "", t, flags=re.S)
    t = re.sub(r"(?<![\\$])\$[^$\n]+?\$", "", t)
    t = re.sub(r"\]\([^)\s]*\)", "]", t)
    t = re.sub(r"<https?://[^>]*>|https?://\S+", "", t)
    t = re.sub(r"<[^>]+>", "", t)
    t = re.sub(r"^[\s|:>-]*-{3,}[\s|:-]*$", "", t, flags=re.M)          # a table's rule
    t = re.sub(r"^\s*(?:>\s*)*(?:#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s)?", "", t, flags=re.M)
    return re.sub(r"[*`|\\]", "", t)


def text_length(text: str) -> float:
    """Length of visible text in Chinese characters: wide (CJK) characters 1, others 1/2, spaces 0."""
    return sum(1.0 if WIDE.match(ch) else 0.5 for ch in text if not ch.isspace())


def prose_length(md: str) -> float:
    return text_length(visible_prose(md))


def markdown_blocks(md: str) -> list[str]:
    """Blocks separated by blank lines; fenced code, $$ math and <details> stay whole."""
    blocks, cur, fence, in_math, details = [], [], None, False, 0
    for line in md.split("\n"):
        s = line.strip()
        if fence:
            cur.append(line)
            fence = None if s.startswith(fence) else fence
            continue
        m = FENCE.match(line)
        if m:
            fence = m.group(1)
            cur.append(line)
            continue
        if s.count("$$") % 2:
            in_math = not in_math
        details += s.count("<details") - s.count("</details>")
        if not s and not in_math and details <= 0:
            if cur:
                blocks.append("\n".join(cur))
            cur = []
        else:
            cur.append(line)
    if cur:
        blocks.append("\n".join(cur))
    return blocks


def markdown_units(md: str) -> list[tuple[str, str]]:
    """The pieces a markdown cell may be split at: (kind, markdown) with kind heading, para, item
    (one item of a list), table, code, math, details or quote (a piece of a blockquote, with its '>')."""
    units: list[tuple[str, str]] = []
    for block in markdown_blocks(md):
        first = block.lstrip()
        if FENCE.match(block):
            units.append(("code", block))
        elif first.startswith("$$"):
            units.append(("math", block))
        elif first.startswith("<details"):
            units.append(("details", block))
        elif re.match(r"#{1,6}\s", first):
            head, _, rest = first.partition("\n")
            units.append(("heading", head))
            units += markdown_units(rest) if rest.strip() else []
        elif first.startswith("|"):
            units.append(("table", block))
        elif first.startswith(">"):
            inner = "\n".join(re.sub(r"^\s*> ?", "", line) for line in block.split("\n"))
            for _, text in markdown_units(inner):
                units.append(("quote", "\n".join("> " + line if line else ">" for line in text.split("\n"))))
        elif LIST_ITEM.match(block):
            item: list[str] = []
            for line in block.split("\n"):
                if LIST_ITEM.match(line) and item:
                    units.append(("item", "\n".join(item)))
                    item = []
                item.append(line)
            units.append(("item", "\n".join(item)))
        elif block.startswith("  ") and units and units[-1][0] == "item":     # a list item's own paragraph
            units[-1] = ("item", units[-1][1] + "\n\n" + block)
        else:
            units.append(("para", block))
    return units


def join_units(units: list[tuple[str, str]]) -> str:
    """Markdown of consecutive units: one list stays one list, one blockquote one blockquote."""
    out = ""
    for i, (kind, text) in enumerate(units):
        if i:
            prev = units[i - 1][0]
            out += "\n>\n" if kind == prev == "quote" else "\n" if kind == prev == "item" else "\n\n"
        out += text
    return out


def unit_height(kind: str, text: str) -> float:
    """Estimated height of a markdown unit on a slide (margins included)."""
    if kind == "heading":
        level = len(text) - len(text.lstrip("#"))
        size, base = {1: (48, 44), 2: (40, 40), 3: (34, 37)}.get(level, (24, 30))
        return base + 1.25 * size * max(1, math.ceil(prose_length(text) * size / WIDTH))
    if kind == "code":
        return CODE_LINE * code_lines(kind, text) + CODE_PAD
    if kind == "math":
        return 100 + 45 * text.count("\\\\")
    if kind == "table":
        rows = text.strip().split("\n")
        return 20 + sum(33 * max(1, math.ceil(prose_length(row) / 30)) + 8 for i, row in enumerate(rows) if i != 1)
    if kind == "details":
        body = text.partition("</summary>")[2].rpartition("</details>")[0]     # opened: 23px text (SLIDE_CSS)
        return 55 + 0.8 * sum(unit_height(k, t) for k, t in markdown_units(body))
    per_line = PROSE_CHARS - (3 if kind in ("item", "quote") else 0)
    lines = sum(max(1, math.ceil(prose_length(part) / per_line)) for part in re.split(r"\n(?=\s*>?\s*[-*+] )", text))
    return lines * PROSE_LINE + (24 if kind in ("para", "quote") else 4) + 100 * (text.count("$$") // 2)


def unit_prose(kind: str, text: str) -> float:
    """Visible prose of a unit; a <details> block shows its summary until it is opened."""
    return prose_length(text.partition("</summary>")[0] if kind == "details" else text)


def text_chars(text: str) -> int:
    """Characters a reader sees, spaces not counted (the measure of SLIDE_TEXT)."""
    return len(re.sub(r"\s", "", text))


def unit_text(kind: str, text: str) -> int:
    """Characters of a markdown unit on screen, an answer opened: its prose (math not counted: typeset,
    it is read as a formula) and its code."""
    if kind == "details":
        return sum(unit_text(k, t) for k, t in markdown_units(re.sub(r"</?(details|summary)>", "\n\n", text)))
    code = "\n".join(text.split("\n")[1:-1]) if kind == "code" else ""
    return text_chars(code or visible_prose(text))


def output_chars(out) -> int:
    """Characters of an output on screen (a figure or a widget: none counted)."""
    data = out.get("data", {})
    html = data.get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    if "normlab-web" in html or "image/png" in data:
        return 0
    if html:
        return text_chars(strip_tags(re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)))
    if "text/markdown" in data:
        return sum(unit_text(k, t) for k, t in markdown_units("".join(data["text/markdown"])))
    text = out.get("text", "") if out.get("output_type") == "stream" else data.get("text/plain", "")
    return text_chars("".join(text))


def code_lines(kind: str, text: str) -> int:
    """Rows of code a markdown unit shows (a fenced block's lines, wrapped ones counting their rows)."""
    return code_block_rows(text.split("\n")[1:-1], FENCED_WIDTH) if kind == "code" else 0


def png_size(b64: str) -> tuple[int, int]:
    import base64
    import struct
    head = base64.b64decode(b64[:44])
    return struct.unpack(">II", head[16:24])


def text_px(text: str, size: float) -> float:
    """Width in px of text at a font size: Chinese characters are square, others about 0.55 wide."""
    return sum(size if WIDE.match(ch) else 0.55 * size for ch in text if ch != "\n")


def wrapped_lines(text: str, size: float, width: float = WIDTH) -> int:
    return sum(max(1, math.ceil(text_px(line, size) / width)) for line in text.split("\n"))


def code_px(text: str) -> float:
    """Width in px of monospace code on a slide: a Chinese character is wider than a Latin one."""
    return sum(CODE_WIDE if WIDE.match(ch) else CODE_CHAR for ch in text)


def code_rows(line: str, width: float = CODE_WIDTH) -> int:
    """Rows one line of code takes on a slide (SLIDE_CSS: pre-wrap): it wraps after a space (a word
    longer than a row breaks anywhere); the rows after the first start CODE_HANG columns right of its
    indent (wrap_code_lines). Chromium may also wrap at other places (after a Chinese character): not
    counting those can only count more rows than it shows."""
    indent = len(line) - len(line.lstrip(" "))
    rest = max(width - (indent + CODE_HANG) * CODE_CHAR, width / 2)
    rows, x, room = 1, 0.0, width
    for token in re.findall(r"\s+|\S+", line):
        w = code_px(token)
        if token.isspace() or x + w <= room:
            x += w                              # spaces at the end of a row hang past it
            continue
        if x > 0:
            rows, x, room = rows + 1, 0.0, rest
        if w <= room:
            x = w
            continue
        for ch in token:                        # longer than a row: broken anywhere
            if x > 0 and x + code_px(ch) > room:
                rows, x, room = rows + 1, 0.0, rest
            x += code_px(ch)
    return rows


def code_block_rows(lines: list[str], width: float = CODE_WIDTH) -> int:
    return sum(code_rows(line, width) for line in lines)


def code_head(lines: list[str], rows: int, width: float = CODE_WIDTH) -> list[str]:
    """The leading lines of some code that take at most ``rows`` rows on a slide."""
    head: list[str] = []
    for line in lines:
        if code_block_rows(head + [line], width) > rows:
            break
        head.append(line)
    return head


def shown_code(source: str) -> list[str]:
    """The lines of a code cell shown on its slide: all of them when they take at most SLIDE_CODE
    rows, else those within CODE_HEAD rows and CODE_CUT (the full code goes to the notes)."""
    lines = source.rstrip().split("\n")
    return lines if code_block_rows(lines) <= SLIDE_CODE else code_head(lines, CODE_HEAD) + [CODE_CUT]


def text_rows(text: str, width: float = OUTPUT_WIDTH) -> int:
    """Rows of a text output (monospace, wrapped anywhere: a row can end a Chinese character short)."""
    return sum(max(1, math.ceil(code_px(line) / (width - CODE_WIDE))) for line in text.split("\n"))


def strip_tags(html: str) -> str:
    import html as htmllib
    return htmllib.unescape(re.sub(r"<[^>]+>", "", html))


def table_height(html: str) -> float:
    """An HTML table in an output (TABLE_PX, line-height 1.4), its columns sized as a browser's automatic
    table layout does: each column gets at least its longest word (min) and, across the slide, the rest
    in proportion to what its widest cell lacks (max - min); a row is as high as its tallest cell."""
    h = 29 * wrapped_lines(strip_tags(m.group(1)), TABLE_PX) + 8 if (m := re.search(r"<caption>(.*?)</caption>", html, re.S)) else 0
    rows = [[strip_tags(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
            for row in re.findall(r"<tr.*?</tr>", html, re.S)]
    most: dict[int, float] = {}
    least: dict[int, float] = {}
    for cells in rows:
        for i, c in enumerate(cells):
            most[i] = max(most.get(i, 0.0), text_px(c, TABLE_PX))
            least[i] = max([least.get(i, 0.0)] + [text_px(w, TABLE_PX) for w in re.split(r"\s+|(?<=%s)" % WIDE.pattern, c)])
    room = WIDTH + 40 - 20 * len(most)       # an output table spans the slide (1190 px), 20 px of padding a cell
    lack = sum(most.values()) - sum(least.values())
    spare = min(1.0, max(0.0, room - sum(least.values())) / lack) if lack else 0.0
    share = {i: least[i] + spare * (most[i] - least[i]) for i in most}
    for cells in rows:
        lines = max([math.ceil(text_px(c, TABLE_PX) / share[i]) if share[i] else 1 for i, c in enumerate(cells)] + [1])
        h += 1.4 * TABLE_PX * lines + 9
    return h + 10


def html_height(html: str) -> float:
    """Tables, preformatted text and 20px text blocks (SLIDE_CSS sets outputs' HTML text to 20px)."""
    h = sum(table_height(t) for t in re.findall(r"<table.*?</table>", html, re.S))
    rest = re.sub(r"<table.*?</table>", "\n", html, flags=re.S)
    h += sum(CODE_LINE * text_rows(strip_tags(p).strip("\n")) + 16 for p in re.findall(r"<pre.*?</pre>", rest, re.S))
    rest = re.sub(r"<pre.*?</pre>", "\n", rest, flags=re.S)
    for block in re.split(r"<(?:br|/?div|/?p|/?li|/?ul|/?ol|/?h\d|/?details|/?summary)\b[^>]*>", rest):
        text = strip_tags(block).strip()
        if text:
            h += 29 * wrapped_lines(text, 20) + 4
    return h + 16


def markdown_output_height(md: str) -> float:
    h = 0.0
    for kind, text in markdown_units(md):
        if kind == "code":
            h += CODE_LINE * code_lines(kind, text) + 24
        elif kind == "table":
            h += 20 + 36 * text.count("\n")
        else:
            h += 29 * wrapped_lines(visible_prose(text).strip(), 20) + 12
    return h + 16


def output_height(out) -> float:
    """Estimated height of one output on a slide (at most OUTPUT_MAX, but a figure or a widget)."""
    data = out.get("data", {})
    html = data.get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    if "normlab-web" in html:        # a course widget (its PNG is for print only): a slide of its own
        return WIDGET_HEIGHT
    if "image/png" in data:
        w, h = png_size(data["image/png"])
        return min(IMG_WIDTH * h / w, IMG_MAX) + 60
    if "normlab-progress" in html:
        width = float(re.search(r"column-width: (\d+)ch", html).group(1)) if "column-width" in html else 80
        columns = max(1, int(WIDTH // (width * CODE_CHAR + 16)))
        return 25 * math.ceil((html.count("\n") + 1) / columns) + 30
    if html:
        h = html_height(html)
    elif "text/markdown" in data:
        h = markdown_output_height("".join(data["text/markdown"]))
    else:
        text = out.get("text", "") if out.get("output_type") == "stream" else data.get("text/plain", "")
        h = CODE_LINE * text_rows("".join(text).rstrip("\n")) + 30
    alone = html.lstrip().startswith("<table") and html.rstrip().endswith("</table>")
    return min(h, (TABLE_MAX if alone else OUTPUT_MAX) + 20)


PREDICT_TAG = "normlab-predict"   # normlab.course.predictions.PREDICT_TAG: the cell of a prompt's choices
CHOICES_WIDTH = 900   # px of a row of option buttons (18px text) in the choice widget


def choices_height(source: str) -> float:
    """Height of a prompt's choice widget (``predict.ask("01", "depth-std")``): its title, its option
    buttons in rows of CHOICES_WIDTH px, its status line."""
    import re as _re

    from normlab.course.predictions import entry

    lesson, pid = _re.search(r'predict\.ask\("([^"]+)",\s*"([^"]+)"\)', source).groups()
    rows, x = 1, 0.0
    for option in entry(lesson, pid)["options"]:
        w = 18 * text_length(f"(A) {option}") + 40
        if x and x + min(w, CHOICES_WIDTH) > CHOICES_WIDTH:
            rows, x = rows + 1, 0.0
        rows += int(w // CHOICES_WIDTH)
        x += min(w, CHOICES_WIDTH) + 10
    return 75 + 36 * rows      # measured in Chromium: 104 px for one row of options


def shows_alone(out) -> bool:
    """A figure or a course widget: shown without the code that made it (large when projected)."""
    data = out.get("data", {})
    html = "".join(data.get("text/html", ""))
    return "normlab-web" in html or ("image/png" in data and not html)
