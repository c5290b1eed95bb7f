"""What a learner may post to the class service, checked before anything is stored (issue 39).

    {"kind": "guess", "lesson": "01", "id": "depth-std", "choice": "B"}
    {"kind": "check", "id": "02.1", "passed": false, "findings": ["unbiased-var"]}
    {"kind": "drill", "card": "layernorm", "level": "interview", "passed": true, "seconds": 212.5}

A body is one event or a list of at most MAX_EVENTS; at most MAX_BODY bytes. ``parse`` returns the
events in the store's shape (kind, lesson, item, ...) or raises Malformed with a message in Chinese
with the English term: the service answers 400 with it and stores none of the body's events.
The user is never part of an event: the service takes it from the caller's token or cookie.
"""

from __future__ import annotations

import json
import math
import re

from ..course import predictions

MAX_BODY = 16 * 1024
MAX_EVENTS = 100
KINDS = ("guess", "check", "drill")
LEVELS = ("interview", "production")
EXERCISE_ID = re.compile(r"^(\d\d)\.\d{1,2}$")
NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")           # a drill card or kind, a finding id
FINDING = re.compile(r"^[A-Za-z0-9_.:\-]{1,60}$")
MAX_FINDINGS = 50
MAX_SECONDS = 7 * 24 * 3600.0
DRILL_LESSON = "08"


class Malformed(ValueError):
    """A post the service refuses with 400 (the message says why)."""


def _need(event: dict, field: str, kind: type | tuple) -> object:
    if field not in event:
        raise Malformed(f"缺少字段 (missing field) {field!r}")
    value = event[field]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise Malformed(f"字段 {field!r} 的类型不对 (wrong type): {type(value).__name__}")
    return value


def _guess(e: dict) -> dict:
    lesson, pid, choice = _need(e, "lesson", str), _need(e, "id", str), _need(e, "choice", str)
    try:
        entry = predictions.entry(lesson, pid)
    except predictions.PredictionError as err:
        raise Malformed(str(err)) from None
    if choice not in entry["keys"]:
        raise Malformed(f"选项 (choice) 只能是 {'、'.join(entry['keys'])}，收到 {choice[:20]!r}")
    return {"kind": "guess", "lesson": lesson, "item": pid, "choice": choice}


def _check(e: dict) -> dict:
    ex = _need(e, "id", str)
    m = EXERCISE_ID.match(ex)
    if not m:
        raise Malformed(f"练习编号 (exercise id) 应形如 \"02.1\"，收到 {ex[:20]!r}")
    findings = _need(e, "findings", list)
    if len(findings) > MAX_FINDINGS or not all(isinstance(f, str) and FINDING.match(f) for f in findings):
        raise Malformed(f"findings 应是至多 {MAX_FINDINGS} 个检查编号 (finding ids) 的列表")
    return {"kind": "check", "lesson": m.group(1), "item": ex, "passed": _need(e, "passed", bool),
            "findings": findings}


def _drill(e: dict) -> dict:
    card = _need(e, "card", str)
    if not NAME.match(card):
        raise Malformed(f"卡片名 (drill card) 只能是小写字母、数字和下划线，收到 {card[:40]!r}")
    level = _need(e, "level", str)
    if level not in LEVELS:
        raise Malformed(f"级别 (level) 只能是 {' / '.join(LEVELS)}，收到 {level[:20]!r}")
    seconds = e.get("seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not math.isfinite(seconds) or not 0 <= seconds <= MAX_SECONDS):
        raise Malformed(f"seconds 应是 0 到 {MAX_SECONDS:.0f} 之间的数 (a number of seconds) 或 null")
    return {"kind": "drill", "lesson": DRILL_LESSON, "item": card, "level": level,
            "passed": _need(e, "passed", bool), "seconds": None if seconds is None else float(seconds)}


CHECKERS = {"guess": _guess, "check": _check, "drill": _drill}
FIELDS = {"guess": {"kind", "lesson", "id", "choice"}, "check": {"kind", "id", "passed", "findings"},
          "drill": {"kind", "card", "level", "passed", "seconds"}}


def one(event: object) -> dict:
    if not isinstance(event, dict):
        raise Malformed(f"每个事件 (event) 应是一个 JSON 对象，收到 {type(event).__name__}")
    kind = event.get("kind")
    if kind not in CHECKERS:
        raise Malformed(f"kind 只能是 {' / '.join(KINDS)}，收到 {str(kind)[:20]!r}")
    unknown = sorted(set(event) - FIELDS[kind])
    if unknown:      # e.g. "user": who posts is the caller's token, never the body
        raise Malformed(f"未知字段 (unknown fields)：{', '.join(str(u)[:20] for u in unknown[:5])}")
    return CHECKERS[kind](event)


def parse(body: bytes) -> list[dict]:
    """The body's events, checked; Malformed if the body or any event is wrong (then none is kept)."""
    if len(body) > MAX_BODY:
        raise Malformed(f"请求太大 (body too large)：{len(body)} 字节，上限 {MAX_BODY}")
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise Malformed(f"请求不是 UTF-8 的 JSON (not UTF-8 JSON)：{err}") from None
    events = data if isinstance(data, list) else [data]
    if not events or len(events) > MAX_EVENTS:
        raise Malformed(f"一次可以发 1 到 {MAX_EVENTS} 个事件 (events)，收到 {len(events)}")
    out = []
    for i, e in enumerate(events):
        try:
            out.append(one(e))
        except Malformed as err:
            raise Malformed(f"第 {i + 1} 个事件 (event {i + 1})：{err}") if len(events) > 1 else err from None
    return out
