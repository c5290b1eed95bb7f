"""The kernel's side of the class service: a learner's guesses, exercise checks and drill reports go to
the service, as that learner (issue 39).

How events get here: the places that record them log one line to the logger ``normlab.events`` with
the event attached (``extra={"normlab_event": {...}}``, the shape normlab/classroom/events.py checks):

    normlab/course/predictions.py  save_guess  {"kind": "guess", "lesson", "id", "choice"}
    normlab/exercises/__init__.py  check       {"kind": "check", "id", "passed", "findings"}
    normlab/drills/progress.py     record      {"kind": "drill", "card", "level", "passed", "seconds"}

The standard library's logging is the meeting point, so the core and the other wings import nothing of
this wing (and the drills, which import nothing of normlab, need nothing either). Nobody listens unless
``install()`` ran: then the logger is at INFO level, sends nothing to the root logger, and hands each event
to a daemon thread that posts it.

Where the service is: $NORMLAB_CLASSROOM_URL (the hub's configuration sets it, normlab/classroom/hubconfig.py)
with $JUPYTERHUB_API_TOKEN, the learner's server token that JupyterHub puts in every single-user server's
environment (its kernels inherit it; the hub gives it the service's access scope). The hub also sets
PYTHONSTARTUP to startup.py, which calls ``install()`` when the kernel starts.

Without the service nothing changes: no variables, no listener (a logged event costs one level check);
a service that does not answer costs the learner no error and no wait: the kernel never waits for a
post (the thread does), and events that could not be sent stay QUEUED in the kernel's memory (at most
MAX_QUEUE) and go with the next post that gets through (retried every RETRY_SECONDS); they are lost
if the kernel stops first. The learner's own files (~/.normlab/...) are written as before either way.
A post the service refuses (400, 403) is dropped, not retried; ``status()`` says what happened last.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.request

LOGGER = "normlab.events"
ATTR = "normlab_event"
URL_VARIABLE = "NORMLAB_CLASSROOM_URL"
TOKEN_VARIABLE = "JUPYTERHUB_API_TOKEN"
TIMEOUT = 3.0
RETRY_SECONDS = 10.0
MAX_QUEUE = 1000
BATCH = 100


def where() -> tuple[str, str] | None:
    """(service URL ending in /, token) when this process runs under a hub with the service, else None."""
    url, token = os.environ.get(URL_VARIABLE, "").strip(), os.environ.get(TOKEN_VARIABLE, "").strip()
    if not url or not token:
        return None
    return (url if url.endswith("/") else url + "/"), token


def request(method: str, path: str, body: object = None, timeout: float = TIMEOUT) -> tuple[int, object]:
    """One call to the service as this kernel's learner: (HTTP status, JSON answer). Raises OSError when
    the service cannot be reached, LookupError when there is no service here."""
    found = where()
    if found is None:
        raise LookupError("这里没有班级服务 (no class service here)")
    url, token = found
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as err:
        try:
            return err.code, json.loads(err.read() or b"null")
        except ValueError:
            return err.code, None


class Poster(logging.Handler):
    """Queues each event the logger carries; a daemon thread posts them in batches."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.inbox: queue.Queue = queue.Queue()
        self.pending: list[dict] = []
        self.sent = 0
        self.dropped = 0
        self.last = "nothing sent yet"
        threading.Thread(target=self._run, name="normlab-classroom", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, ATTR, None)
        if isinstance(event, dict):
            self.inbox.put(event)

    def _run(self) -> None:
        while True:
            items = []
            try:
                items.append(self.inbox.get(timeout=RETRY_SECONDS if self.pending else None))
            except queue.Empty:
                pass
            while True:                                    # everything queued so far goes in this round
                try:
                    items.append(self.inbox.get_nowait())
                except queue.Empty:
                    break
            self.pending += [e for e in items if isinstance(e, dict)]
            self._send()
            for marker in items:
                if isinstance(marker, threading.Event):    # flush() waits for it
                    marker.set()

    def wait_sent(self, timeout: float) -> bool:
        marker = threading.Event()
        self.inbox.put(marker)
        return marker.wait(timeout) and not self.pending

    def _send(self) -> None:
        while self.pending:
            batch = self.pending[:BATCH]
            try:
                status, answer = request("POST", "api/events", batch)
            except (OSError, LookupError) as err:
                self.last = f"服务没有回应，{len(self.pending)} 个事件留在队列里 (service unreachable, queued): {err}"
                del self.pending[:-MAX_QUEUE]
                return
            del self.pending[:len(batch)]
            if status == 200:
                self.sent += len(batch)
                self.last = f"已发送 (sent) {self.sent}"
            else:
                self.dropped += len(batch)
                message = answer.get("error") if isinstance(answer, dict) else answer
                self.last = f"服务拒绝了 {len(batch)} 个事件 (refused, HTTP {status}): {message}"


_poster: Poster | None = None


def install() -> bool:
    """Listen to ``normlab.events`` and post what it carries, when the service is here (see the module
    docstring). Returns whether it listens; called again, it changes nothing."""
    global _poster
    if _poster is not None:
        return True
    if where() is None:
        return False
    _poster = Poster()
    log = logging.getLogger(LOGGER)
    log.addHandler(_poster)
    log.setLevel(logging.INFO)
    log.propagate = False               # the learner's own logging setup never prints these
    threading.Thread(target=_hello, daemon=True).start()
    return True


def _hello() -> None:
    try:
        request("POST", "api/hello", {})
    except (OSError, LookupError):
        pass


def flush(timeout: float = 10.0) -> bool:
    """Wait until every event logged so far has been sent (or refused); False if some are still queued
    after ``timeout`` or nothing listens. Tests and the benchmark use it; a lesson never needs to."""
    return _poster is not None and _poster.wait_sent(timeout)


def status() -> str:
    """What the client did last, in a sentence (for a learner who asks)."""
    if _poster is None:
        return "没有连接班级服务 (no class service): 事件只记在你自己的文件里 (events stay in your own files)"
    return f"{_poster.last}；队列中 (queued) {len(_poster.pending)}；被拒绝 (refused) {_poster.dropped}"


def distribution(lesson: str, pid: str) -> dict | None:
    """The class's distribution of a prompt, for this learner (after their guess reached the service);
    None when there is no service or it refuses (not guessed yet, not reachable)."""
    try:
        status_, answer = request("GET", f"api/poll/{lesson}/{pid}")
    except (OSError, LookupError):
        return None
    return answer if status_ == 200 else None
