"""The slides' cuts (tools/slide_layout.py uses them): a paragraph or a table row cut to what a slide
holds (the rest goes to the speaker notes), a long table output split over slides with its header
repeated, and a figure's reference (左图/右图) on a slide without the figure pointed to the slide that has it."""

from __future__ import annotations

import html as htmllib
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slide_model import (CODE_LINE, CODE_PAD, PREDICT_TAG, PROSE_CUT, SHORT_ITEM, choices_height, code_block_rows,  # noqa: E402
                         prose_length, shown_code, shows_alone, strip_tags, table_height, unit_prose)


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
    return [nbformat.v4.new_output("display_data", data={"text/html": table(
        rows, f"<caption>{htmllib.escape(title)}（{i}/{len(chunks)}）</caption>")})
        for i, rows in enumerate(chunks, 1)]


COMMIT = re.compile(r"\s?@[0-9a-f]{7,40}\b")     # file@commit, as the lessons cite code


def without_commits(out, notes: list[str]):
    """A table output that cites code at file@commit (06's models): on the slide its files without the
    commit hashes, which took half its width and so twice the slides; each row that had them goes
    to the speaker notes whole."""
    html = out.get("data", {}).get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    if "<table" not in html or not COMMIT.search(html):
        return out
    rows = [" | ".join(strip_tags(c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S))
            for row in re.findall(r"<tr.*?</tr>", html, re.S) if COMMIT.search(row)]
    notes.append("出处和提交号 (sources at their commits)：\n\n" + "\n".join(f"- {row}" for row in rows))
    data = dict(out["data"], **{"text/html": COMMIT.sub("", html)})
    return nbformat.v4.new_output("display_data", data=data)


FIGURE_REF = re.compile(r"(?<![页面的])([左右上下中])图")


def has_figure(cell) -> bool:
    return cell.cell_type == "code" and any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def point_to_figures(cells: list) -> int:
    """A slide's prose that says 左图/右图/上图/下图 on a slide without a figure (the figure is on a slide of
    its own, issue 28 item 11) says where it is: 下一页的右图, 上一页的左图, or 后面/前面的 when the
    figure is further. Returns the references rewritten."""
    groups: list[list] = []
    for cell in cells:
        if cell.metadata.get("slideshow", {}).get("slide_type") in ("slide", "subslide") or not groups:
            groups.append([])
        groups[-1].append(cell)
    with_figure = [i for i, g in enumerate(groups) if any(has_figure(c) for c in g)]
    rewritten = 0
    for i, group in enumerate(groups):
        if i in with_figure or not with_figure:
            continue
        after = [j for j in with_figure if j > i]
        before = [j for j in with_figure if j < i]
        if after and (not before or after[0] - i <= i - before[-1]):
            where = "下一页的" if after[0] == i + 1 else "后面的"
        else:
            where = "上一页的" if before[-1] == i - 1 else "前面的"
        for cell in group:
            if cell.cell_type == "markdown" and cell.metadata.get("slideshow", {}).get("slide_type") != "notes":
                cell.source, n = FIGURE_REF.subn(lambda m: where + m.group(0), cell.source)
                rewritten += n
    return rewritten


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
        if cell.cell_type == "code" and PREDICT_TAG in cell.metadata.get("tags", []):
            return choices_height(cell.source)
        if cell.cell_type == "code":
            figure = any(shows_alone(o) for o in cell.get("outputs", []))
            return 0 if figure else CODE_LINE * code_block_rows(shown_code(cell.source)) + CODE_PAD
        if cell.metadata.get("slideshow", {}).get("slide_type") != "notes":
            return 0
    return 0


def short_list_items(units: list[tuple[str, str]]) -> set[int]:
    """Indices of the units that are items of a list (consecutive items) whose every item has at
    most SHORT_ITEM of prose: their prose counts towards SLIDE_LIST, not SLIDE_PROSE."""
    out, run = set(), []
    for i, (kind, text) in enumerate(units + [("end", "")]):
        if kind == "item":
            run.append(i)
            continue
        if run and all(prose_length(units[j][1]) <= SHORT_ITEM for j in run):
            out.update(run)
        run = []
    return out


def slide_prose(units: list[tuple[str, str]]) -> tuple[float, float]:
    """(prose, prose of short lists) of the markdown units on a slide, every <details> closed."""
    listed = short_list_items(units)
    return (sum(unit_prose(k, t) for i, (k, t) in enumerate(units) if i not in listed),
            sum(unit_prose(k, t) for i, (k, t) in enumerate(units) if i in listed))
