"""The 先想一想 prompts' choices as data, and where a learner's guesses are kept (issue 28 item 2).
Core, standard library only: normlab.course calls ``with_prediction_cells`` at export (no torch, no
anywidget; a core module, so course.py imports no wing). The widgets are normlab/widgets/predict.py.

The choices live in normlab/predictions_data.py (lesson, a stable id, the prompt's first words, options,
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

MARK = "**先想一想**"
PREDICT_TAG, SUMMARY_TAG = "normlab-predict", "normlab-predict-summary"
HIDE_INPUT = "remove-input"                  # the book shows the widget, not its two lines of code (slides: always)
STORAGE_KEY = "normlab.predictions"          # the browser's localStorage key (book, slides)
KEYS = "ABCDEFGH"
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
        missing = [k for k in ("lesson", "id", "starts", "options", "answer", "evidence") if k not in entry]
        if missing:
            raise PredictionError(f"predictions_data: 条目 (entry) {entry.get('id', '?')} 缺少 {', '.join(missing)}")
        entry["keys"] = list(KEYS[: len(entry["options"])])
        if entry["answer"] not in entry["keys"]:
            raise PredictionError(f"predictions_data: {entry['lesson']}.{entry['id']} 的 answer "
                                  f"{entry['answer']!r} 不是选项之一 (not one of {entry['keys']})")
        out.append(entry)
    return tuple(out)


def entries(lesson: str | None = None) -> list[dict]:
    """The prompts' entries (each: lesson, id, starts, options, keys, answer, evidence, ask?)."""
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
    path = path or store_path()
    guesses = load_guesses(path)
    guesses[f"{lesson}.{pid}"] = {"choice": choice, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"version": 1, "guesses": guesses}, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    # The class service's client listens here when a hub runs it (normlab/classroom/client.py); else no-op.
    logging.getLogger("normlab.events").info("guess %s.%s %s", lesson, pid, choice, extra={"normlab_event": {
        "kind": "guess", "lesson": lesson, "id": pid, "choice": choice}})
    return path


def score(lesson: str, guesses: dict[str, dict]) -> list[dict]:
    """Per prompt of the lesson: id, choice ("" if none), answer, right (None if no guess)."""
    rows = []
    for e in entries(lesson):
        choice = guesses.get(f"{lesson}.{e['id']}", {}).get("choice", "")
        rows.append({"id": e["id"], "choice": choice, "answer": e["answer"],
                     "right": (choice == e["answer"]) if choice else None})
    return rows
