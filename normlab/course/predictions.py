"""The 先想一想 prompts' choices as data, and where a learner's guesses are kept (issue 28 item 2).
The course layer, standard library only: normlab.course calls ``with_prediction_cells`` at export (no
torch, no anywidget, no wing). The widgets (normlab/widgets/predict.py) and the class service
(normlab/classroom/) import this module, a layer below them.

The choices live in normlab/course/predictions_data.py (lesson, a stable id, the prompt's first words, options,
the right option), not in the notebook sources: a new code cell in a source would change its recorded
fingerprint. At export each prompt's markdown cell gets a code cell right after it,

    from normlab.widgets import predict
    predict.ask("01", "depth-std")

and a lesson with prompts ends with ``predict.summary("01")`` (normlab/widgets/predict.py draws them).
The prompt's answer, the first ``<details><summary>答案 …</summary>`` fold after it (before the next
prompt), is tied to it at export by an empty marker inside its summary,
``<span class="nl-answer-for nl-answer-for-01-depth-std"></span>`` (``answer_marker``): a class, since
JupyterLab's HTML sanitizer keeps ``class`` and drops ``data-*``; inside the summary, so the fold still
starts with ``<details><summary>答案`` (the slides' layout finds answers by that). The widget's
front-end keeps that fold shut until the learner has picked an option (web/predict.js).

The learner copy (``learner_layout``, applied by normlab.course to the copies learners get) makes a
prompt a question before it is code (issue 36): its choice cell waits for the guess
(``await predict.ask(...)``: Run All stops there until the learner picks, then runs on; the one-line
comment that starts it is all its collapsed input shows), a prompt that does not list its choices
gets them listed (seen before any cell runs), and the experiment's code cells between it and its answer fold
are collapsed (``jupyter.source_hidden``), each starting with HIDDEN_LINE, which the widget's
front-end looks for to open them after the pick. The solution copy and the slides keep the plain
``predict.ask(...)`` and the code in view. A runner that must not stop (the test run, the book, the
sweep) sets ``NORMLAB_PREDICT_WAIT=0`` (WAIT_ENV): the choice widget is drawn, nothing is guessed.

Guesses: ``~/.normlab/predictions.json`` (or the file NORMLAB_PREDICTIONS names), written by the kernel
when the learner picks an option in JupyterLab; ``{"version": 1, "guesses": {"01.depth-std": {"choice":
"B", "time": "..."}}}``. Without a kernel (the book, the slides) the browser keeps the same object in its
localStorage under STORAGE_KEY.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from functools import lru_cache
from pathlib import Path

from .predictions_data import PROMPTS
from .private import private_dir, write_private

MARK = "**先想一想**"
PREDICT_TAG, SUMMARY_TAG = "normlab-predict", "normlab-predict-summary"
HIDE_INPUT = "remove-input"                  # the book shows the widget, not its two lines of code (slides: always)
STORAGE_KEY = "normlab.predictions"          # the browser's localStorage key (book, slides)
KEYS = "ABCDEFGH"
WAIT_ENV = "NORMLAB_PREDICT_WAIT"            # "0": an unanswered prompt does not stop the run (runners set it)
# The first line of the learner copy's choice cell and of each experiment cell it collapses: what
# JupyterLab shows of a collapsed cell (its first line), and how web/predict.js finds the cells to open.
ASK_LINE = "# 先想一想 (predict first)：运行这一格，在它下面选一个预测；选好之前，下面的实验不会运行。"
HIDDEN_LINE = "# 这一格的代码在你预测之后展开 (this code opens after your guess)"
# The discussion right after an answer fold, in the learner copy: a fold of its own, locked like the
# answer (its summary carries the prompt's marker, plus DISCUSSION_CLASS). Not a collapsed cell:
# JupyterLab's Run All renders every markdown cell and un-collapses it.
DISCUSSION_CLASS = "nl-discussion"
DISCUSSION_SUMMARY = "接着读：结果的讨论 (read on after your guess)"
ASK_CALL = re.compile(r'predict\.ask\("(\d+)", "([^"]+)"\)')
ANSWER_CLASS = "nl-answer-for"               # every tagged answer fold's marker; plus answer_class(key)
# An answer fold's summary, with the marker an earlier export put there (replaced, not doubled).
ANSWER_FOLD = re.compile(r'(<details>\s*<summary>\s*答案[^<]*?)\s*(?:<span class="nl-answer-for[^"]*"></span>)?(</summary>)')


class PredictionError(ValueError):
    """A learner-facing message (Chinese with the English term)."""


# --- the data ---------------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _load() -> tuple[dict, ...]:
    out = []
    for p in PROMPTS:
        entry = dict(p)
        missing = [k for k in ("lesson", "id", "starts", "options", "answer", "evidence", "reveals") if k not in entry]
        if missing:
            raise PredictionError(f"predictions_data: 条目 (entry) {entry.get('id', '?')} 缺少 {', '.join(missing)}")
        if not (isinstance(entry["reveals"], (list, tuple)) and entry["reveals"]
                and all(isinstance(r, str) and r.strip() for r in entry["reveals"])):
            raise PredictionError(f"predictions_data: {entry['lesson']}.{entry['id']} 的 reveals 应是非空的字符串列表 "
                                  "(reveals: a non-empty list of strings)")
        entry["keys"] = list(KEYS[: len(entry["options"])])
        if entry["answer"] not in entry["keys"]:
            raise PredictionError(f"predictions_data: {entry['lesson']}.{entry['id']} 的 answer "
                                  f"{entry['answer']!r} 不是选项之一 (not one of {entry['keys']})")
        out.append(entry)
    return tuple(out)


def entries(lesson: str | None = None) -> list[dict]:
    """The prompts' entries (each: lesson, id, starts, options, keys, answer, evidence, reveals, ask?)."""
    es = _load()
    return [dict(e) for e in es if lesson is None or e["lesson"] == lesson]


def entry(lesson: str, pid: str) -> dict:
    for e in entries(lesson):
        if e["id"] == pid:
            return e
    known = ", ".join(e["id"] for e in entries(lesson)) or "(none)"
    raise PredictionError(f"没有这个预测题 (no such prompt)：{lesson}.{pid}；第 {lesson} 课有 (known)：{known}")


# --- the prompts in a notebook ---------------------------------------------------------------------------

def prompt_texts(source: str) -> list[str]:
    """The 先想一想 paragraphs of a markdown cell, each without the mark, a leading （…） remark and "："."""
    out = []
    for para in re.split(r"\n\s*\n", source):
        para = para.strip()
        if para.startswith(MARK):
            rest = para[len(MARK):].lstrip()
            rest = re.sub(r"^（[^）]*）", "", rest).lstrip("：: ").strip()
            out.append(rest)
    return out


def match(text: str, lesson: str) -> dict | None:
    """The entry of lesson whose ``starts`` begins the prompt ``text`` (None if none)."""
    found = [e for e in entries(lesson) if text.startswith(e["starts"])]
    return found[0] if len(found) == 1 else None


def answer_class(key: str) -> str:
    """The class that ties an answer fold to the prompt "lesson.id" (web/predict.js writes it the same way)."""
    return f"{ANSWER_CLASS}-" + re.sub(r"[^A-Za-z0-9_-]", "-", key)


def answer_marker(key: str) -> str:
    """The empty marker at the end of an answer fold's summary that names its prompt."""
    return f'<span class="{ANSWER_CLASS} {answer_class(key)}"></span>'


def _prompt_starts(source: str) -> list[tuple[int, str]]:
    """(offset, text) of each 先想一想 paragraph of a markdown cell, in order (the texts of prompt_texts)."""
    out, pos = [], 0
    for gap in re.finditer(r"\n\s*\n|\Z", source):
        if source[pos:gap.start()].strip().startswith(MARK):
            out.append(pos)
        pos = gap.end()
    return list(zip(out, prompt_texts(source)))


def ask_source(lesson: str, pid: str) -> str:
    return f'from normlab.widgets import predict\npredict.ask("{lesson}", "{pid}")'


def learner_ask_source(lesson: str, pid: str) -> str:
    """The learner copy's choice cell: it waits for the guess (normlab.widgets.predict.Ask.__await__)."""
    return f'{ASK_LINE}\nfrom normlab.widgets import predict\nawait predict.ask("{lesson}", "{pid}")'


def summary_source(lesson: str) -> str:
    return f'from normlab.widgets import predict\npredict.summary("{lesson}")'


def _tag_answers(source: str, lesson: str, pending: str | None) -> tuple[str, str | None]:
    """A markdown cell with its answer folds tied to their prompts, in the order they come: a fold gets
    the marker of the prompt still waiting for its answer (``pending``, "lesson.id"; one an earlier
    export put there is replaced); every other fold is left as it is. Returns the new source and the
    prompt still waiting after it."""
    events = sorted([(at, "prompt", text) for at, text in _prompt_starts(source)]
                    + [(m.start(), "fold", m) for m in ANSWER_FOLD.finditer(source)], key=lambda ev: ev[0])
    out, pos = [], 0
    for _, kind, what in events:
        if kind == "prompt":
            e = match(what, lesson)
            pending = f"{lesson}.{e['id']}" if e is not None else None     # a prompt with no entry: its answer stays open
            continue
        if pending:
            out.append(source[pos:what.start()] + what.group(1) + answer_marker(pending) + what.group(2))
            pos, pending = what.end(), None
    return "".join(out) + source[pos:], pending


def with_prediction_cells(nb, stem: str):
    """The notebook with a choice cell right after each prompt's markdown cell that has an entry, and a
    summary cell at the end when it has any (cells tagged PREDICT_TAG / SUMMARY_TAG; run again, the
    old ones are replaced). A prompt without an entry gets none (tests/test_predictions.py fails).
    The first answer fold after each such prompt (before the next one) carries ``answer_marker``."""
    import nbformat

    lesson = stem[:2]
    cells, asked, pending = [], 0, None
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if PREDICT_TAG in tags or SUMMARY_TAG in tags:
            continue
        cells.append(cell)
        if cell.cell_type != "markdown":
            continue
        cell.source, pending = _tag_answers(cell.source, lesson, pending)
        for text in prompt_texts(cell.source):
            e = match(text, lesson)
            if e is not None:
                cells.append(nbformat.v4.new_code_cell(ask_source(lesson, e["id"]), metadata={"tags": [PREDICT_TAG, HIDE_INPUT]}))
                asked += 1
    if asked:
        cells.append(nbformat.v4.new_code_cell(summary_source(lesson), metadata={"tags": [SUMMARY_TAG, HIDE_INPUT]}))
    nb.cells = cells
    return nb


CHOICES = "选项 (choices)："


def choices_line(e: dict) -> str:
    """The learner copy's list of a prompt's choices, added to its markdown when the prompt does not list
    them itself (a number to fill in): the question and its choices read before any cell runs."""
    opts = "；".join(f"**({k})** {t}" for k, t in zip(e["keys"], e["options"]))
    ask = f"（{e['ask']}）" if e.get("ask") else ""
    return f"{CHOICES}{opts}{ask}。运行下面的格子（或 Run All）后在那里选。"


def _collapse(cell, first_line: str | None = None) -> None:
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
    if first_line and not cell.source.startswith(first_line):
        cell.source = f"{first_line}\n{cell.source}"


def _is_discussion(cell) -> bool:
    """A markdown cell that only discusses a result: no heading (the next section), no prompt."""
    return (cell.cell_type == "markdown" and not re.search(r"^#{1,6} ", cell.source, re.M)
            and not prompt_texts(cell.source))


def discussion_fold(text: str, key: str) -> str:
    """A discussion of a result, shut until the prompt ``key`` has a guess (web/predict.js opens it then)."""
    marker = f'<span class="{ANSWER_CLASS} {answer_class(key)} {DISCUSSION_CLASS}"></span>'
    return f'<details class="{DISCUSSION_CLASS}"><summary>{DISCUSSION_SUMMARY}{marker}</summary>\n\n{text}\n\n</details>'


def learner_layout(nb):
    """The learner copy's prompts (module docstring): each choice cell waits for the guess and shows only
    its first line (ASK_LINE); a prompt that does not list its choices gets ``choices_line`` at the end
    of its markdown cell (a saved output would do in JupyterLab, but nbval fails a cell that has
    outputs and was never run); the code cells after the choice cell, up to its
    answer fold (the markdown cell with its marker; or the next prompt), are collapsed and start with
    HIDDEN_LINE; every markdown cell after the fold that only discusses the result (up to the next heading
    or prompt) becomes a fold locked like the answer (``discussion_fold``), and the code cells between
    them (a figure, a table, the checks of the result: their code can state the answer) are collapsed
    like the experiment. Cells are neither added nor removed (nbval_book
    maps cells by position). Idempotent."""
    pending, pending_key, after_fold, prompt_cell = None, "", False, None
    for cell in nb.cells:
        if PREDICT_TAG in cell.get("metadata", {}).get("tags", []):
            lesson, pid = ASK_CALL.search(cell.source).groups()
            cell.source = learner_ask_source(lesson, pid)
            _collapse(cell)
            e = entry(lesson, pid)
            listed = [t for t in prompt_texts(prompt_cell.source) if t.startswith(e["starts"])] if prompt_cell else []
            if listed and "(A)" not in listed[0] and choices_line(e) not in prompt_cell.source:
                prompt_cell.source = f"{prompt_cell.source.rstrip()}\n\n{choices_line(e)}"
            pending_key = f"{lesson}.{pid}"
            pending, after_fold = answer_class(pending_key), False
        elif after_fold and cell.cell_type == "code":
            _collapse(cell, HIDDEN_LINE)         # a figure, table or check of the result: shut like the experiment
        elif after_fold:
            if not _is_discussion(cell):         # a heading or the next prompt ends the discussion
                after_fold = False
            elif DISCUSSION_CLASS not in cell.source:
                cell.source = discussion_fold(cell.source, pending_key)
        elif pending and cell.cell_type == "markdown":
            after_fold = pending in cell.source and not re.search(r"</details>\s*\S", cell.source)
            if pending in cell.source or prompt_texts(cell.source):
                pending = None
        elif pending and cell.cell_type == "code":
            _collapse(cell, HIDDEN_LINE)
        if cell.cell_type == "markdown":
            prompt_cell = cell
    return nb


def waits() -> bool:
    """Does an unanswered prompt stop the run here? Not where a runner said so (WAIT_ENV=0)."""
    return os.environ.get(WAIT_ENV, "1") != "0"


# --- the learner's guesses ---------------------------------------------------------------------------------

def store_path() -> Path:
    """Where the kernel keeps the guesses: $NORMLAB_PREDICTIONS, else ~/.normlab/predictions.json."""
    env = os.environ.get("NORMLAB_PREDICTIONS")
    return Path(env).expanduser() if env else Path.home() / ".normlab" / "predictions.json"


def load_guesses(path: Path | None = None) -> dict[str, dict]:
    """{"lesson.id": {"choice", "time"}}; a missing or unreadable file is no guesses (never an error)."""
    path = path or store_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    guesses = data.get("guesses") if isinstance(data, dict) else None
    return {k: v for k, v in (guesses or {}).items() if isinstance(v, dict) and isinstance(v.get("choice"), str)}


def save_guess(lesson: str, pid: str, choice: str, path: Path | None = None) -> Path:
    """Record a guess (the latest one counts); returns the file. Written whole through a temporary file."""
    e = entry(lesson, pid)
    if choice not in e["keys"]:
        raise PredictionError(f"选项 (option) 只能是 {'、'.join(e['keys'])}，收到 {choice!r}")
    own_folder = path is None and not os.environ.get("NORMLAB_PREDICTIONS")    # ~/.normlab
    path = path or store_path()
    guesses = load_guesses(path)
    guesses[f"{lesson}.{pid}"] = {"choice": choice, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    # owner-only (0600 in a 0700 ~/.normlab): a learner's guesses are theirs alone on a shared server
    if own_folder:
        private_dir(path.parent)
    written = write_private(path, json.dumps({"version": 1, "guesses": guesses}, ensure_ascii=False, indent=1))
    # The class service's client listens here when a hub runs it (normlab/classroom/client.py); else no-op.
    logging.getLogger("normlab.events").info("guess %s.%s %s", lesson, pid, choice, extra={"normlab_event": {
        "kind": "guess", "lesson": lesson, "id": pid, "choice": choice}})
    return written


def score(lesson: str, guesses: dict[str, dict]) -> list[dict]:
    """Per prompt of the lesson: id, choice ("" if none), answer ("" until guessed: a summary never
    shows the answer to a prompt the learner has not answered), right (None if no guess)."""
    rows = []
    for e in entries(lesson):
        choice = guesses.get(f"{lesson}.{e['id']}", {}).get("choice", "")
        rows.append({"id": e["id"], "choice": choice, "answer": e["answer"] if choice else "",
                     "right": (choice == e["answer"]) if choice else None})
    return rows
