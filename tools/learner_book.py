"""The learners' book: the learner copies as run, and the experiments of each 先想一想 prompt locked until a guess.

Two jobs, both on the staged notebook (tools/book.py ``stage_book`` without ``--teacher``):

1. **No solution** (issue 36, "two books"). A lesson with answers reaches the learners' book as its
   learner version (``normlab.course.versions(nb, learner=True)``: each answer a ``raise
   NotImplementedError``, solution-only lines and text gone) with the outputs that version printed: a
   check cell shows "还没有写 (not written yet)", never "通过 PASSED". ``learner_view`` takes them from
   build/executed/NAME_learner.ipynb. Where that execution is nbval's (a test run: live widgets, no
   inline figures) only the cells the learner version changed keep its outputs; every other cell, the
   same code in the same kernel state, takes the solution execution's (static widgets, figures).

2. **The experiment waits for the guess** (issue 40). Every code cell between a prompt's choice cell
   and its answer fold (the markdown cell carrying ``answer_marker``), and every code cell among the locked
   discussion after the fold (a figure, table or check of the result), gets the tags LOCKED and
   ``lock_tag(key)``; myst-nb turns them into the classes ``tag_nl-locked`` and ``tag_nl-lock-01-depth-std``.
   LOCK_JS (in the page's <head>) hides those cells, input and output, behind one cue line (CUE) per
   prompt until the reader has picked an option of that prompt (the guesses predict.js keeps in
   localStorage, the same key); a pick on the page opens them at once, a reload keeps them open.
   Without JavaScript or without localStorage nothing is hidden (the page is as before), as the
   answer fold's own lock fails open (normlab/widgets/web/predict.js).
"""

from __future__ import annotations

import copy
import difflib
import re

import nbformat

LOCKED = "nl-locked"
CUE = "先选一个预测，再看结果 (pick a guess to see the result)"
STORAGE_KEY = "normlab.predictions"      # normlab.course.predictions.STORAGE_KEY (tools import no normlab at module level)
PREDICT_TAG = "normlab-predict"          # normlab.course.predictions.PREDICT_TAG
ASK = re.compile(r'predict\.ask\("([^"]+)",\s*"([^"]+)"\)')


def lock_suffix(key: str) -> str:
    """"01.depth-std" -> "01-depth-std", as normlab.course.predictions.answer_class and predict.js write it."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", key)


def lock_tag(key: str) -> str:
    return f"nl-lock-{lock_suffix(key)}"


def plain_code(source: str) -> str:
    """A code cell's code without the learner copy's layout (a collapsed cell's first line, the choice
    cell's first line and await; normlab.course.predictions.learner_layout)."""
    from normlab.course.predictions import ASK_LINE, HIDDEN_LINE

    lines = [ln for ln in source.split("\n") if ln not in (ASK_LINE, HIDDEN_LINE)]
    return "\n".join(lines).replace("await predict.ask(", "predict.ask(")


def code_sources(nb) -> list[str]:
    return [plain_code(c.source) for c in nb.cells if c.cell_type == "code"]


def learner_view(learner, solution):
    """The learner execution (``learner``) with, where nbval made it, the solution execution's outputs
    on every code cell whose code the learner version did not change (see the module's docstring)."""
    nb = copy.deepcopy(learner)
    if nb.metadata.get("normlab_executed_by") != "nbval":
        return nb
    mine = [c for c in nb.cells if c.cell_type == "code"]
    theirs = [c for c in solution.cells if c.cell_type == "code"]
    same = difflib.SequenceMatcher(a=code_sources(nb), b=code_sources(solution), autojunk=False)
    for block in same.get_matching_blocks():
        for k in range(block.size):
            mine[block.a + k].outputs = copy.deepcopy(theirs[block.b + k].outputs)
    nb.metadata["widgets"] = copy.deepcopy(solution.metadata.get("widgets", {}))
    return nb


def lock_experiments(nb) -> dict[str, int]:
    """Tag each code cell between a prompt's choice cell and its answer fold, and after the fold those among
    the prompt's locked discussion (a figure, table or check of the result), with LOCKED and lock_tag(key);
    returns {key: cells locked}. A prompt whose fold never comes locks nothing (the answer is not
    held back anywhere, so neither is its experiment)."""
    locked: dict[str, int] = {}
    cells = nb.cells
    for i, cell in enumerate(cells):
        found = ASK.search(cell.source) if cell.cell_type == "code" and PREDICT_TAG in cell.metadata.get("tags", []) else None
        if not found:
            continue
        key = f"{found.group(1)}.{found.group(2)}"
        marker = f"nl-answer-for-{lock_suffix(key)}"
        between, fold = [], None
        for j, later in enumerate(cells[i + 1:], i + 1):
            if later.cell_type == "markdown" and marker in later.source:
                fold = j
                break
            if later.cell_type == "code" and PREDICT_TAG in later.metadata.get("tags", []):
                break                         # the next prompt came first: no fold for this one
            if later.cell_type == "code":
                between.append(later)
        if fold is None:
            between = []
        else:                                 # after the fold: the discussion's figure, table and check cells,
            for later in cells[fold + 1:]:    # up to a markdown cell that is not this prompt's (locked) discussion
                if later.cell_type == "markdown" and marker not in later.source:
                    break
                if later.cell_type == "code" and PREDICT_TAG in later.metadata.get("tags", []):
                    break
                if later.cell_type == "code":
                    between.append(later)
        for later in between:
            tags = later.metadata.setdefault("tags", [])
            tags += [t for t in (LOCKED, lock_tag(key)) if t not in tags]
        locked[key] = len(between)
    return locked


# In the page's <head> (tools/book.py writes it into the book's normlab.js): it runs before the body is
# parsed, so a locked cell is hidden (normlab.css: html.nl-lock-on) before it is ever drawn.
LOCK_JS = r"""
(function () {
  var KEY = "%(key)s", CUE = "%(cue)s";
  var store = null;
  try { var probe = KEY + ".probe"; window.localStorage.setItem(probe, "1");
        window.localStorage.removeItem(probe); store = window.localStorage; } catch (err) { return; }
  var root = document.documentElement;
  root.classList.add("nl-lock-on");                        // no localStorage, no JS: nothing is hidden
  var suffix = function (key) { return String(key).replace(/[^A-Za-z0-9_-]/g, "-"); };
  var guessed = function () {
    try { var d = JSON.parse(store.getItem(KEY) || "{}"); var g = (d && d.guesses) || {};
          return Object.keys(g).filter(function (k) { return g[k] && g[k].choice; }).map(suffix); }
    catch (err) { return []; }
  };
  var open = function (s) {
    var cells = document.querySelectorAll(".tag_nl-lock-" + s + ", .nl-lock-cue[data-lock='" + s + "']");
    for (var i = 0; i < cells.length; i++) cells[i].classList.add("nl-open");
  };
  var cues = function () {                                 // one cue per prompt, before its first locked cell
    var seen = {}, cells = document.querySelectorAll(".tag_nl-locked");
    for (var i = 0; i < cells.length; i++) {
      var m = /(?:^|\s)tag_nl-lock-(\S+)/.exec(cells[i].className);
      if (!m || seen[m[1]]) continue;
      seen[m[1]] = true;
      var cue = document.createElement("p");
      cue.className = "nl-lock-cue"; cue.setAttribute("role", "note"); cue.dataset.lock = m[1];
      cue.textContent = CUE;
      cells[i].parentNode.insertBefore(cue, cells[i]);
    }
    guessed().forEach(open);
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", cues); else cues();
  window.addEventListener("normlab-prediction", function (ev) { if (ev.detail && ev.detail.key) open(suffix(ev.detail.key)); });
  window.addEventListener("storage", function () { guessed().forEach(open); });
})();
""" % {"key": STORAGE_KEY, "cue": CUE}


def learners_notebook(learner, solution):
    """The notebook the learners' book shows: learner_view, experiments locked."""
    nb = learner_view(learner, solution)
    lock_experiments(nb)
    return nbformat.from_dict(nb)
