"""The class service: a hub-managed JupyterHub service (issue 39).

    python -m normlab.classroom.service --db /srv/normlab/classroom.sqlite

The hub starts it (``c.JupyterHub.services``, see normlab/classroom/hubconfig.py) with its own token
and prefix in the environment (JUPYTERHUB_API_TOKEN, JUPYTERHUB_SERVICE_PREFIX, JUPYTERHUB_SERVICE_URL).
Who is calling comes from JupyterHub's own ``jupyterhub.services.auth.HubOAuth``: a learner's kernel
sends its server's token (``Authorization: token ...``), a browser the service's OAuth cookie (and an
XSRF header on API calls). A caller is a teacher when their token carries TEACH_SCOPE (a custom scope
the hub gives the teachers' group).

API, under the prefix (JSON; errors are {"error": "<Chinese (English)>"}):
    POST api/events              a learner's own events (normlab/classroom/events.py): 200 {"stored": n}
    POST api/hello               "I am here" (a kernel or page opened): counts towards N
    GET  api/me                  the caller's own record
    GET  api/record/NAME         NAME's record: NAME themselves or a teacher (403 otherwise)
    GET  api/poll/LESSON/ID      a prompt's distribution {counts, n, N, answer?, revealed}; a learner: only
                                 after guessing it (403 before), no answer before the reveal
    GET  api/lesson/LESSON       the prompts revealed so far (learners' pages poll it to open folds)
    GET  api/class               teacher: every prompt's distribution
    GET  api/grid, api/grid.csv  teacher: learners x lessons
    POST api/reveal              teacher: {"lesson", "id"}: the answer is shown to the class
    GET  api/session.js          a classic script: window.normlabClassroom = {user, teacher, xsrf, base}
    GET  deck/NN_name.slides.html  teacher: a lecture deck (--decks) with the class's bars and reveal buttons
    GET  (the prefix itself)     the teacher's dashboard (a learner: their own record)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from tornado import ioloop, web
from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join

from ..course import predictions
from . import events as ev
from .hubconfig import TEACH_SCOPE
from .store import Store, grid_csv

WEB = Path(__file__).resolve().parent / "web"


def is_teacher(user: dict) -> bool:
    return TEACH_SCOPE in (user.get("scopes") or ())


class Base(HubOAuthenticated, web.RequestHandler):
    """Every handler: the caller is a hub user (token or cookie) with access to this service."""

    def initialize(self, store: Store) -> None:
        self.store = store

    def write_error(self, status_code: int, **kwargs) -> None:
        err = kwargs.get("exc_info", (None, None))[1]
        message = getattr(err, "log_message", None) or self._reason
        self.finish({"error": message})

    def prepare(self) -> None:
        if len(self.request.body or b"") > ev.MAX_BODY:
            raise web.HTTPError(400, f"请求太大 (body too large)：{len(self.request.body)} 字节，上限 {ev.MAX_BODY}")

    def caller(self) -> dict:
        """The authenticated caller, or 403 (no valid token or cookie, or no access to the service)."""
        user = self.current_user
        if not user or user.get("kind", "user") != "user":
            raise web.HTTPError(403, "没有登录，或没有这项服务的权限 (not logged in, or no access to this service)")
        self.store.seen(user["name"], is_teacher(user))
        return user

    def teacher(self) -> dict:
        user = self.caller()
        if not is_teacher(user):
            raise web.HTTPError(403, "只有老师可以看这一页 (teachers only)")
        return user

    def prompt(self, lesson: str, pid: str) -> dict:
        try:
            return predictions.entry(lesson, pid)
        except predictions.PredictionError as err:
            raise web.HTTPError(404, str(err)) from None

    def poll(self, entry: dict, answer: bool) -> dict:
        revealed = any(r["id"] == entry["id"] for r in self.store.revealed(entry["lesson"]))
        out = self.store.distribution(entry["lesson"], entry["id"], entry["keys"])
        out.update(lesson=entry["lesson"], id=entry["id"], N=max(self.store.present(), out["n"]),
                   revealed=revealed, options=entry["options"])
        if answer or revealed:
            out["answer"] = entry["answer"]
        return out


class Events(Base):
    def post(self) -> None:
        user = self.caller()
        try:
            events = ev.parse(self.request.body)
        except ev.Malformed as err:
            raise web.HTTPError(400, str(err)) from None
        self.store.add_many(user["name"], events)
        self.finish({"stored": len(events)})


class Hello(Base):
    def post(self) -> None:
        user = self.caller()
        self.finish({"user": user["name"], "teacher": is_teacher(user)})


class Me(Base):
    def get(self) -> None:
        user = self.caller()
        self.finish({"user": user["name"], "teacher": is_teacher(user), "events": self.store.record(user["name"])})


class Record(Base):
    def get(self, name: str) -> None:
        user = self.caller()
        if name != user["name"] and not is_teacher(user):
            raise web.HTTPError(403, "只能看你自己的记录 (you may read your own record only)")
        self.finish({"user": name, "events": self.store.record(name)})


class Poll(Base):
    def get(self, lesson: str, pid: str) -> None:
        user = self.caller()
        entry = self.prompt(lesson, pid)
        teacher = is_teacher(user)
        if not teacher and self.store.guessed(user["name"], lesson, pid) is None:
            raise web.HTTPError(403, "先做出你的预测，再看全班的分布 (guess first, then see the class's distribution)")
        self.finish(self.poll(entry, answer=teacher))


class Lesson(Base):
    def get(self, lesson: str) -> None:
        self.caller()
        self.finish({"lesson": lesson, "revealed": self.store.revealed(lesson)})


class Class(Base):
    def get(self) -> None:
        self.teacher()
        self.finish({"prompts": [self.poll(e, answer=True) for e in predictions.entries()],
                     "events": self.store.count(), "N": self.store.present()})


class Grid(Base):
    def get(self, csv: str) -> None:
        self.teacher()
        rows = self.store.grid()
        totals = {}
        for e in predictions.entries():
            totals[e["lesson"]] = totals.get(e["lesson"], 0) + 1
        for r in rows:
            r["prompts"] = totals.get(r["lesson"], 0)
        if csv:
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.set_header("Content-Disposition", 'attachment; filename="normlab-class.csv"')
            self.finish(grid_csv(rows).encode("utf-8"))
        else:
            self.finish({"rows": rows})


class Reveal(Base):
    def post(self) -> None:
        self.teacher()
        try:
            body = json.loads(self.request.body or b"{}")
            lesson, pid = body["lesson"], body["id"]
        except (ValueError, KeyError, TypeError):
            raise web.HTTPError(400, '应是 {"lesson": "01", "id": "..."} (expected lesson and id)') from None
        if not isinstance(lesson, str) or not isinstance(pid, str):
            raise web.HTTPError(400, "lesson 和 id 应是字符串 (strings)")
        entry = self.prompt(lesson, pid)
        self.store.reveal(lesson, pid)
        self.finish(self.poll(entry, answer=True))


class Session(Base):
    """A classic <script> (same-origin, no-cors: HubOAuth reads the cookie without an XSRF header)
    that hands a page what its fetch() calls need."""

    def get(self) -> None:
        user = self.current_user
        if not user and self.get_argument("login", ""):     # a page that wants the class: the OAuth round first
            self.redirect(self.get_login_url())
            return
        info = {"user": None, "teacher": False, "xsrf": "", "base": self.hub_auth.base_url}
        if user:
            self.store.seen(user["name"], is_teacher(user))
            info.update(user=user["name"], teacher=is_teacher(user), xsrf=self.xsrf_token.decode("ascii"))
        self.set_header("Content-Type", "text/javascript; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(f"window.normlabClassroom = {json.dumps(info)};\n")


class Deck(Base):
    """The teacher's lecture decks (tools/book.py slides: build/slides/), served from --decks with the
    class's bars added: the deck's HTML gets session.js and classroom.js before </body>. A deck is for
    teachers only (it shows every answer); its vendored libraries (reveal.js, MathJax) for anyone."""

    def initialize(self, store: Store, decks: str | None) -> None:
        super().initialize(store)
        self.decks = Path(decks).resolve() if decks else None

    def get(self, name: str) -> None:
        path = (self.decks / name).resolve() if self.decks else None
        if path is None or self.decks not in path.parents or not path.is_file():
            raise web.HTTPError(404, f"没有这个文件 (no such deck file)：{name}")
        if not path.name.endswith(".slides.html"):        # the decks' vendored libraries: nothing of the course
            import mimetypes
            self.set_header("Content-Type", mimetypes.guess_type(path.name)[0] or "application/octet-stream")
            self.finish(path.read_bytes())
            return
        if not self.current_user:                         # a teacher's browser: the OAuth round first
            self.redirect(self.get_login_url())
            return
        self.teacher()
        base = self.hub_auth.base_url
        tags = (f'<script src="{base}api/session.js"></script>\n'
                f'<script type="module" src="{base}static/classroom.js"></script>\n</body>')
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(path.read_text(encoding="utf-8").replace("</body>", tags, 1))


class Page(Base):
    @web.authenticated
    def get(self) -> None:
        user = self.caller()
        page = "teacher.html" if is_teacher(user) else "learner.html"
        html = (WEB / page).read_text(encoding="utf-8")
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(html.replace("{{base}}", self.hub_auth.base_url).replace("{{user}}", user["name"])
                    .replace("{{xsrf}}", self.xsrf_token.decode("ascii")))


def cookie_secret(db: Path) -> bytes:
    """The secret that signs the service's cookies, kept beside the database: a restart of the service
    keeps every browser logged in (their next call needs no new OAuth round)."""
    path = db.with_name(db.name + ".cookie_secret")
    if not path.exists():
        path.write_bytes(os.urandom(32).hex().encode("ascii"))
        path.chmod(0o600)
    return path.read_bytes().strip()


def make_app(store: Store, prefix: str | None = None, decks: str | None = None) -> web.Application:
    prefix = prefix or os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/normlab-classroom/")
    auth = HubOAuth(api_token=os.environ.get("JUPYTERHUB_API_TOKEN", ""))     # caches a token's owner 5 min
    kw = {"store": store}
    routes = [
        (r"oauth_callback", HubOAuthCallbackHandler, None),
        (r"api/events", Events, kw), (r"api/hello", Hello, kw), (r"api/me", Me, kw),
        (r"api/record/([^/]{1,100})", Record, kw),
        (r"api/poll/(\d\d)/([A-Za-z0-9_-]{1,60})", Poll, kw), (r"api/lesson/(\d\d)", Lesson, kw),
        (r"api/class", Class, kw), (r"api/grid(\.csv)?", Grid, kw), (r"api/reveal", Reveal, kw),
        (r"api/session\.js", Session, kw), (r"deck/(.+)", Deck, {**kw, "decks": decks}), (r"static/(.*)", web.StaticFileHandler, {"path": str(WEB)}),
        (r"", Page, kw),
    ]
    return web.Application(
        [(url_path_join(prefix, pattern), handler, args) if args is not None else
         (url_path_join(prefix, pattern), handler) for pattern, handler, args in routes],
        hub_auth=auth, cookie_secret=cookie_secret(store.path), login_url=auth.login_url,
        max_body_size=4 * ev.MAX_BODY)


def main(argv: list[str] | None = None) -> int:
    from urllib.parse import urlparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=os.environ.get("NORMLAB_CLASSROOM_DB", "normlab-classroom.sqlite"),
                    help="the SQLite file (keep it on a persistent volume)")
    ap.add_argument("--decks", default=os.environ.get("NORMLAB_CLASSROOM_DECKS"),
                    help="the folder of the built decks (build/slides), served to teachers at deck/NAME")
    args = ap.parse_args(argv)
    store = Store(args.db)
    url = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"))
    host = url.hostname or "127.0.0.1"
    local = host in ("127.0.0.1", "localhost", "::1")
    make_app(store, decks=args.decks).listen(url.port or 80, host if local else "")     # a named host (Z2JH's "hub"): every interface
    print(f"[normlab-classroom] {time.strftime('%H:%M:%S')} listening on {url.geturl()}, "
          f"{store.count()} events in {args.db} ({store.journal_mode()})", flush=True)
    ioloop.IOLoop.current().start()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
