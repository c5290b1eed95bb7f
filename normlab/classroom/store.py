"""The class service's storage: one SQLite file in WAL mode (issue 39).

Every event is one row, appended, never updated: a learner's latest guess of a prompt is the row with
the highest id for (user, prompt). Each write is its own transaction (``with self.db``), committed
before the service answers, so a restart of the service or of the hub loses nothing it acknowledged.
WAL lets the teacher's reads run while learners write.

    store = Store(path)
    store.add("alice", {"kind": "guess", "lesson": "01", "id": "depth-std", "choice": "B"})
    store.distribution("01", "depth-std")     # {"counts": {"A": 0, "B": 1, "C": 0}, "n": 1}
    store.record("alice")                     # alice's own events, newest last
    store.grid()                              # learners x lessons (the teacher's table)

Events are checked before they get here (normlab.classroom.events.validate).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    user     TEXT NOT NULL,
    kind     TEXT NOT NULL,            -- guess | check | drill
    lesson   TEXT NOT NULL,            -- "01"; a drill card's lesson is "08"
    item     TEXT NOT NULL,            -- prompt id, exercise id ("02.1") or drill card
    choice   TEXT,                     -- guess: the option's key
    passed   INTEGER,                  -- check, drill: 0 / 1
    level    TEXT,                     -- drill: interview | production
    seconds  REAL,                     -- drill: the timed check's time
    findings TEXT,                     -- check: JSON list of the failed finding ids
    time     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_item ON events (kind, lesson, item, user);
CREATE INDEX IF NOT EXISTS events_user ON events (user);
CREATE TABLE IF NOT EXISTS people (
    user      TEXT PRIMARY KEY,
    teacher   INTEGER NOT NULL DEFAULT 0,
    last_seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS reveals (
    lesson TEXT NOT NULL,
    item   TEXT NOT NULL,
    time   REAL NOT NULL,
    PRIMARY KEY (lesson, item)
);
"""
PRESENT_SECONDS = 3 * 3600        # "logged in": seen by the service (page or kernel) in the last 3 hours
SEEN_EVERY = 60.0                 # seconds between two writes of one user's last_seen


class Store:
    """The service's SQLite file (created if missing). One connection, used from the service's one
    thread (tornado's loop); the lock makes it safe for the benchmark's and tests' threads too."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        # Every learner's events: readable by the service's account only (the teacher reads them through the
        # service), whatever the umask: a folder it makes is 0700, the file is 0600 before SQLite opens it
        # (SQLite gives its -wal and -shm files the database file's mode).
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a committed event survives a crash or kill of the service or the hub (it is in the
        # WAL file); a power cut may lose the last moments' commits, never corrupt the file (SQLite's WAL docs).
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(SCHEMA)
        self.lock = threading.Lock()
        self._seen: dict[str, tuple[float, bool]] = {}

    def close(self) -> None:
        self.db.close()

    def journal_mode(self) -> str:
        return self.db.execute("PRAGMA journal_mode").fetchone()[0]

    # ------------------------------------------------------------------------------------ writes
    def seen(self, user: str, teacher: bool = False, now: float | None = None) -> None:
        """Note that the user is here (N counts learners seen lately); written at most once a minute each."""
        now = now or time.time()
        last = self._seen.get(user)
        if last and last[1] == teacher and last[0] > now - SEEN_EVERY:
            return
        self._seen[user] = (now, teacher)
        with self.lock:
            self.db.execute("INSERT INTO people (user, teacher, last_seen) VALUES (?, ?, ?) ON CONFLICT(user) "
                            "DO UPDATE SET teacher = excluded.teacher, last_seen = excluded.last_seen",
                            (user, int(teacher), now))

    def add(self, user: str, event: dict, now: float | None = None) -> None:
        """Append one checked event (a transaction of its own)."""
        self.add_many(user, [event], now)

    def add_many(self, user: str, events: list[dict], now: float | None = None) -> None:
        """Append checked events in one transaction: all are stored or none."""
        now = now or time.time()
        rows = [(user, e["kind"], e["lesson"], e["item"], e.get("choice"),
                 None if e.get("passed") is None else int(e["passed"]), e.get("level"), e.get("seconds"),
                 None if e.get("findings") is None else json.dumps(e["findings"]), now) for e in events]
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany("INSERT INTO events (user, kind, lesson, item, choice, passed, level, seconds, "
                                    "findings, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def reveal(self, lesson: str, item: str, now: float | None = None) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO reveals (lesson, item, time) VALUES (?, ?, ?)",
                            (lesson, item, now or time.time()))

    # ------------------------------------------------------------------------------------ reads
    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.lock:
            return self.db.execute(sql, args).fetchall()

    def count(self) -> int:
        return self._rows("SELECT COUNT(*) FROM events")[0][0]

    def guessed(self, user: str, lesson: str, item: str) -> str | None:
        """The user's latest guess of the prompt, or None."""
        rows = self._rows("SELECT choice FROM events WHERE kind = 'guess' AND lesson = ? AND item = ? AND user = ? "
                          "ORDER BY id DESC LIMIT 1", (lesson, item, user))
        return rows[0][0] if rows else None

    def distribution(self, lesson: str, item: str, keys: list[str]) -> dict:
        """Each learner's latest guess of the prompt, counted per key; n = learners who guessed."""
        rows = self._rows(
            "SELECT e.choice, COUNT(*) FROM events e JOIN (SELECT user, MAX(id) AS last FROM events "
            "WHERE kind = 'guess' AND lesson = ? AND item = ? GROUP BY user) l ON e.id = l.last "
            "LEFT JOIN people p ON p.user = e.user WHERE COALESCE(p.teacher, 0) = 0 GROUP BY e.choice",
            (lesson, item))
        counts = {k: 0 for k in keys}
        for choice, n in rows:
            counts[choice] = counts.get(choice, 0) + n
        return {"counts": counts, "n": sum(counts.values())}

    def present(self, now: float | None = None) -> int:
        """N: learners (not teachers) seen in the last PRESENT_SECONDS."""
        since = (now or time.time()) - PRESENT_SECONDS
        return self._rows("SELECT COUNT(*) FROM people WHERE teacher = 0 AND last_seen >= ?", (since,))[0][0]

    def revealed(self, lesson: str | None = None) -> list[dict]:
        sql, args = "SELECT lesson, item, time FROM reveals", ()
        if lesson:
            sql, args = sql + " WHERE lesson = ?", (lesson,)
        return [{"lesson": l, "id": i, "time": t} for l, i, t in self._rows(sql + " ORDER BY time", args)]

    def record(self, user: str) -> list[dict]:
        """The user's own events, oldest first."""
        rows = self._rows("SELECT kind, lesson, item, choice, passed, level, seconds, findings, time FROM events "
                          "WHERE user = ? ORDER BY id", (user,))
        out = []
        for kind, lesson, item, choice, passed, level, seconds, findings, t in rows:
            e = {"kind": kind, "lesson": lesson, "id": item, "time": t}
            e.update({k: v for k, v in (("choice", choice), ("level", level), ("seconds", seconds)) if v is not None})
            if passed is not None:
                e["passed"] = bool(passed)
            if findings is not None:
                e["findings"] = json.loads(findings)
            out.append(e)
        return out

    def grid(self) -> list[dict]:
        """One row per (learner, lesson): prompts guessed, exercises passed (of those tried), drill cards
        passed (of those tried), last activity. Teachers are left out."""
        rows = self._rows(
            "SELECT e.user, e.lesson, "
            "COUNT(DISTINCT CASE WHEN kind = 'guess' THEN item END), "
            "COUNT(DISTINCT CASE WHEN kind = 'check' AND passed = 1 THEN item END), "
            "COUNT(DISTINCT CASE WHEN kind = 'check' THEN item END), "
            "COUNT(DISTINCT CASE WHEN kind = 'drill' AND passed = 1 THEN item END), "
            "COUNT(DISTINCT CASE WHEN kind = 'drill' THEN item END), MAX(time) "
            "FROM events e LEFT JOIN people p ON p.user = e.user WHERE COALESCE(p.teacher, 0) = 0 "
            "GROUP BY e.user, e.lesson ORDER BY e.user, e.lesson")
        return [{"user": u, "lesson": l, "guessed": g, "exercises_passed": xp, "exercises_tried": xt,
                 "cards_passed": cp, "cards_tried": ct, "last": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))}
                for u, l, g, xp, xt, cp, ct, t in rows]


def grid_csv(rows: list[dict]) -> str:
    """The teacher's grid as CSV (UTF-8; the header names the columns in English)."""
    out = io.StringIO()
    fields = ["user", "lesson", "guessed", "prompts", "exercises_passed", "exercises_tried", "cards_passed", "cards_tried", "last"]
    writer = csv.DictWriter(out, fieldnames=fields, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
