"""The answer key's markers, and a lesson source with its answers taken out: what the wheel learners
install carries (setup.py, issue 36 leak 5). Standard library only: setup.py runs it at build time,
where the course's dependencies (jupytext) need not be installed.

Markers in a lesson source (notebooks/NN_*.md, jupytext MyST): code between "### BEGIN SOLUTION" and
"### END SOLUTION" is a reference answer, and a line ending in "# solution-only" belongs to it too;
markdown between "<!-- BEGIN SOLUTION -->" and "<!-- END SOLUTION -->" (each on its own line) is part of
the answer; a cell tagged "solution" is answer as a whole; a markdown cell with
``slideshow: {slide_type: notes}`` is a teacher's note.

``learner_source`` keeps every marker with nothing between them (so normlab.course makes the same
learner copy from it as from the full source) and drops the tagged cells (a code cell's code; a markdown
cell whole), the solution-only lines and the teacher notes. A bundle made of such sources holds LEARNER_ONLY; ``normlab-course init
--solutions`` refuses it and says where a teacher's solutions come from.
"""

from __future__ import annotations

import json
import re

BEGIN, END, ONLY = "### BEGIN SOLUTION", "### END SOLUTION", "# solution-only"
MD_BEGIN, MD_END, TAG = "<!-- BEGIN SOLUTION -->", "<!-- END SOLUTION -->", "solution"
LEARNER_ONLY = "LEARNER-COPIES-ONLY.txt"     # in the wheel's normlab/_course/: the answers were taken out
LEARNER_ONLY_TEXT = ("这个课程包只带学习版 (learner copies only)：练习和卡片的答案、讲课提示都不在里面。"
                     "老师的答案版来自课程仓库：normlab-course init 目录 --solutions --from 仓库目录。\n")

_FENCE = re.compile(r"^(`{3,})\{code-cell\}")


def _is_dropped(separator: str) -> bool:
    """Whether a markdown cell's `+++ {json}` line marks a teacher's note or an answer (tagged solution)."""
    try:
        meta = json.loads(separator[3:].strip() or "{}")
    except ValueError:
        return False
    return isinstance(meta, dict) and ((meta.get("slideshow") or {}).get("slide_type") == "notes"
                                       or TAG in (meta.get("tags") or []))


def _tagged_solution(options: list[str]) -> bool:
    """Whether a code cell's option lines (`:tags: [...]` or a YAML `tags:` line) name the solution tag."""
    for line in options:
        m = re.match(r"^:?tags:\s*\[(.*)\]\s*$", line.strip())
        if m and TAG in [t.strip().strip("'\"") for t in m.group(1).split(",")]:
            return True
    return False


def learner_source(text: str) -> str:
    """A MyST lesson source with every answer and teacher note taken out, the markers kept."""
    out: list[str] = []
    lines = text.split("\n")
    i, in_md_answer, in_notes = 0, False, False
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:                                            # a code cell: opening, options, body, closing
            in_notes = in_md_answer = False
            out.append(line)
            i += 1
            options = []
            if i < len(lines) and lines[i] == "---":         # YAML options block
                options.append(lines[i])
                i += 1
                while i < len(lines) and lines[i] != "---":
                    options.append(lines[i])
                    i += 1
                options.append(lines[i] if i < len(lines) else "---")
                i += 1
            while i < len(lines) and lines[i].startswith(":") and not lines[i].startswith(fence.group(1)):
                options.append(lines[i])
                i += 1
            out.extend(options)
            whole = _tagged_solution(options)
            inside = False
            while i < len(lines) and lines[i] != fence.group(1):
                stripped = lines[i].strip()
                if stripped == BEGIN:
                    inside = True
                    out.append(lines[i])
                elif stripped == END:
                    inside = False
                    out.append(lines[i])
                elif not (whole or inside or stripped.endswith(ONLY)):
                    out.append(lines[i])
                i += 1
            if i < len(lines):
                out.append(lines[i])                         # the closing fence
            i += 1
            continue
        if line.startswith("+++"):                           # a new markdown cell
            in_notes, in_md_answer = _is_dropped(line), False
        if in_notes:
            i += 1
            continue
        stripped = line.strip()
        if stripped == MD_BEGIN:
            in_md_answer = True
            out.append(line)
        elif stripped == MD_END:
            in_md_answer = False
            out.append(line)
        elif not in_md_answer:
            out.append(line)
        i += 1
    return "\n".join(out)
