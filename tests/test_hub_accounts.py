"""A class server with real OS accounts (issues 38 and 39): JupyterHub's real LocalProcessSpawner runs each
learner's server and kernels as that learner's own account, configured by the class recipe's own file
(deploy/tljh/normlab.py, loaded as TLJH loads it, the class service on; tools/hub_accounts.py says what
differs from a TLJH server). Three learners are made for the test with `useradd` (one home is
"/home/张三 的家 …": Chinese characters and a space) and their homes opened to 0755, as plain `useradd -m`
leaves them on Debian, so nothing but the course's own file modes keeps their work private. A teacher
account gets the solutions through deploy/tljh/install.sh's teacher step, run as the admin would, and
joins the hub group normlab-teachers as the admin page puts them.

Checked here: the server start writes each learner's workspace as that learner, owner-only; the three
learners run lesson 00 and a drill check at once in their own kernels (one wrong answer fails), each
progress file holds that learner's attempts only; a learner's kernel cannot open() another learner's
workspace, answer file or ~/.normlab files, nor the teacher's solutions, nor the class service's
database (the events of everyone, kept where a TLJH server keeps it); a learner's terminal has the
course's python first (`python -m normlab.drills --help`); cross-learner HTTP is refused (a token, a login
cookie, and straight to the other server's port); the class service's checks (tests/test_classroom_hub.py's
tests, collected here to run on this hub); killing the service, restarting the hub and a learner's server
lose no byte of any learner's files and no event; the accounts are removed afterwards.

One hub for all of it (its start, the accounts and three first logins are most of the cost). Needs root
(useradd, a hub that spawns as other users): skipped with the reason elsewhere, where tests/test_hub.py's
one-user hub and tests/test_classroom_hub.py's own hub run instead; the suite runs as root on the course's
machines and in CI.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import hub as hubtool  # noqa: E402  (tools/hub.py)
import hub_accounts as accounts  # noqa: E402  (tools/hub_accounts.py)

from normlab.classroom import hubconfig  # noqa: E402
from test_hub import GOOD_LN, GOOD_RMS, WRONG_LN  # noqa: E402  (the one-user hub's answers)

RUN = secrets.token_hex(3)                              # account names of this run only
HOMES = {f"nl{RUN}a": f"/home/nl{RUN}a", f"nl{RUN}b": f"/home/张三 的家 {RUN}", f"nl{RUN}c": f"/home/nl{RUN}c"}
LEARNERS = tuple(HOMES)
TEACHER = f"nl{RUN}t"
# what each learner submits to which card, and the checker's exit code: two cards, one wrong answer
SUBMISSIONS = {LEARNERS[0]: ("layernorm", GOOD_LN, 0), LEARNERS[1]: ("layernorm", WRONG_LN, 1),
               LEARNERS[2]: ("rmsnorm", GOOD_RMS, 0)}
NOTE = "我的笔记 (my notes) — written through her own server"


def snapshot(home: Path) -> dict[str, str]:
    """sha256 of every file the course keeps for a learner: the workspace and ~/.normlab."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in (home / "normlab-course", home / ".normlab") for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def hub():
    why = accounts.why_not()
    if why:
        if os.environ.get("CI") and hubtool.available():
            pytest.fail(f"CI installs jupyterhub and its proxy (the 'test' extra), but: {hubtool.available()}")
        pytest.skip(why)
    base = Path(tempfile.mkdtemp(prefix="normlab-accounts-"))
    base.chmod(0o755)                           # the learners run the environment inside it
    t0 = time.time()
    teacher_step = None
    opened = accounts.let_others_pass([ROOT, sysconfig.get_paths()["purelib"]])   # (a clone in a 0700 folder)
    try:
        try:
            user_env = accounts.user_environment(base / "user")    # TLJH_PREFIX/user/bin, as on a TLJH server
        except accounts.Unavailable as err:
            pytest.skip(str(err))
        phases = {"user environment": time.time() - t0}
        for name, home in {**HOMES, TEACHER: f"/home/nl{RUN}t"}.items():
            accounts.make_account(name, home)
        admin = base / "admin home"                            # the admin's HOME: install.sh must not use it
        admin.mkdir(mode=0o700)
        private = base / "root-only"
        private.mkdir(mode=0o700)
        repo = accounts.private_repository(private)
        with open(base / "teacher-step.log", "wb") as said:    # (the admin's own locale and environment)
            teacher_step = subprocess.Popen(                    # meanwhile the hub starts and the learners log in
                ["sh", str(repo / "deploy/tljh/install.sh"), "teacher", "t"], stdout=said, stderr=subprocess.STDOUT,
                cwd=admin, env=dict(os.environ, HOME=str(admin), TLJH_PREFIX=str(base), NORMLAB_TEACHER_ACCOUNT=TEACHER))
        state = base / "hub"
        state.mkdir(mode=0o700)
        h = accounts.AccountsHub(state, user_env)
        h.learners, h.teacher, h.admin = LEARNERS, TEACHER, admin
        with h:
            phases["hub start"] = time.time() - t0
            for name in (*LEARNERS, TEACHER):
                h.add_learner(name)
            status, _ = h.api("POST", f"/groups/{hubconfig.TEACHERS_GROUP}/users", body={"users": [TEACHER]})
            assert status == 200, status                       # (the admin page's "add to group")
            h.start_servers(LEARNERS, timeout=180)             # three first logins at once
            phases["three servers ready"] = time.time() - t0
            h.tokens = {name: h.token(name) for name in (*LEARNERS, TEACHER)}
            teacher_step.wait(timeout=300)
            phases["teacher step done"] = time.time() - t0
            h.teacher_step = (teacher_step.returncode, (base / "teacher-step.log").read_text(encoding="utf-8", errors="replace"))
            h.started, h.phases = time.time() - t0, phases
            yield h
    finally:
        if teacher_step and teacher_step.poll() is None:
            teacher_step.kill()
        left = accounts.remove_accounts([*LEARNERS, TEACHER])  # (their servers and kernels first, by pid)
        shutil.rmtree(base, ignore_errors=True)
        accounts.restore_modes(opened)
        assert not left, f"accounts left behind: {left}"


def test_the_server_start_writes_each_learners_workspace_as_theirs_and_private(hub):
    for name in LEARNERS:
        home, uid = hub.home(name), pwd.getpwnam(name).pw_uid
        ws = home / "normlab-course"
        lessons = sorted(p.name for p in ws.glob("[0-9][0-9]_*.ipynb"))
        assert lessons[0] == "00_course_map.ipynb" and len(lessons) >= 10, (name, lessons)
        assert not (home / "NORMLAB-INIT-FAILED.md").exists(), name
        for p in [ws, *ws.rglob("*")]:
            st = p.stat()
            assert st.st_uid == uid, (name, p)
            assert st.st_mode & 0o077 == 0, (name, p, oct(st.st_mode))
    assert str(hub.home(LEARNERS[1])).startswith("/home/张三 的家")


def peek_cell(name: str, others: list[Path], wait: float = 60.0) -> str:
    """A learner's own kernel, after lesson 00: write their drill answer, check it (the drills command's
    main, which writes ~/.normlab/drills.json), save a guess (~/.normlab/predictions.json); then try to
    open() each of the other paths. An attempt counts once it is refused (PermissionError) or succeeds; a
    missing path is retried (another learner may not have written it yet) until `wait`, then reported as
    missing."""
    card, source, _ = SUBMISSIONS[name]
    return f'''
import json, os, pathlib, time
os.chdir(os.path.expanduser("~/normlab-course"))
pathlib.Path("my_{card}.py").write_text({source!r}, encoding="utf-8")
from normlab.drills.__main__ import main as drills      # `python -m normlab.drills CARD FILE`, in this kernel
drill = drills(["{card}", "my_{card}.py"])
from normlab.course import predictions
e = predictions.entries("03")[0]
predictions.save_guess("03", e["id"], e["keys"][0])
seen, deadline = {{}}, time.time() + {wait}
for path in {[str(p) for p in others]!r}:
    while True:
        try:
            if os.path.isdir(path) or path.endswith("/"):
                os.listdir(path)
            else:
                open(path, "rb").read(1)
            seen[path] = "READ"
        except PermissionError:
            seen[path] = "refused"
        except FileNotFoundError:
            if time.time() < deadline:
                time.sleep(0.5)
                continue
            seen[path] = "missing"
        break
print("DRILL", drill)
print("RESULT", json.dumps(seen, ensure_ascii=False))
'''


def test_learners_run_lesson_00_and_a_drill_at_once_and_cannot_open_each_others_work(hub):
    code, said = hub.teacher_step
    assert code == 0, said
    teacher_home = Path(pwd.getpwnam(TEACHER).pw_dir)
    solutions = teacher_home / "normlab-course" / "solutions"
    assert (solutions / "01_residuals.ipynb").is_file() and not list(hub.admin.iterdir())
    assert "return x + self.branch(x)" in (solutions / "01_residuals.ipynb").read_text(encoding="utf-8")

    def learner(name):
        others = []
        for other in LEARNERS:
            if other != name:
                h = hub.home(other)
                others += [h / "normlab-course/", h / "normlab-course/01_residuals.ipynb",
                           h / f"normlab-course/my_{SUBMISSIONS[other][0]}.py", h / ".normlab/",
                           h / ".normlab/drills.json", h / ".normlab/predictions.json"]
        others += [solutions / "01_residuals.ipynb", solutions, hub.db, hub.db.parent]   # and the class's events
        cells = hubtool.lesson_cells(hub.home(name), "00_course_map.ipynb") + [peek_cell(name, others)]
        return hub.run_code(name, hub.tokens[name], cells, keep=True)       # (the class service's tests go on in it)

    with ThreadPoolExecutor(len(LEARNERS)) as pool:
        results = dict(zip(LEARNERS, pool.map(learner, LEARNERS)))
    for name, r in results.items():
        assert r["error"] is None and f"DRILL {SUBMISSIONS[name][2]}" in r["stdout"], (name, r)
        seen = json.loads(r["stdout"].rsplit("RESULT ", 1)[1])
        assert len(seen) == 2 * 6 + 4 and set(seen.values()) == {"refused"}, (name, seen)
    progress = {}
    for name in LEARNERS:                                     # (what they were refused exists, and is theirs)
        home = hub.home(name)
        for rel in (f"normlab-course/my_{SUBMISSIONS[name][0]}.py", ".normlab/drills.json", ".normlab/predictions.json"):
            assert (home / rel).stat().st_uid == pwd.getpwnam(name).pw_uid, (name, rel)
        assert oct((home / ".normlab").stat().st_mode & 0o777) == "0o700"
        progress[name] = json.loads((home / ".normlab/drills.json").read_text(encoding="utf-8"))
    # each learner's attempts are in their own progress file, and only theirs
    a, b, c = (json.dumps(progress[n], ensure_ascii=False) for n in LEARNERS)
    assert "layernorm" in a and "rmsnorm" not in a and "layernorm" in b and "rmsnorm" not in b
    assert "rmsnorm" in c and '"layernorm"' not in c and a != b        # a passed layernorm, b's attempt failed


def test_a_learners_terminal_runs_the_course_python(hub):
    """JupyterLab's terminal, through the learner's own server: `python -m normlab.drills --help` works."""
    import requests
    import websocket

    name, token = LEARNERS[1], hub.tokens[LEARNERS[1]]
    headers = {"Authorization": f"token {token}"}
    r = requests.post(f"{hub.url}/user/{name}/api/terminals", headers=headers, timeout=60)
    assert r.status_code == 200, (r.status_code, r.text[:500], hub.log_tail())
    term = r.json()["name"]
    ws = websocket.create_connection(f"ws://127.0.0.1:{hub.port}/user/{name}/terminals/websocket/{term}",
                                     header=[f"Authorization: token {token}"], timeout=120)
    out, deadline = "", time.time() + 120
    try:
        ws.send(json.dumps(["stdin", "python -m normlab.drills --help > /dev/null; echo TERMINAL-$?-$(id -un)\r"]))
        while not re.search(r"TERMINAL-\d+-\S+\r?\n", out) and time.time() < deadline:
            msg = json.loads(ws.recv())
            if msg[0] == "stdout":
                out += msg[1]
    finally:
        ws.close()
        requests.delete(f"{hub.url}/user/{name}/api/terminals/{term}", headers=headers, timeout=30)
    assert f"TERMINAL-0-{name}" in out, out[-2000:]


def test_a_learner_cannot_reach_another_learners_server(hub):
    import requests

    a, b = LEARNERS[0], LEARNERS[1]
    token = {"Authorization": f"token {hub.tokens[a]}"}
    assert requests.get(f"{hub.url}/user/{a}/api/contents", headers=token, timeout=30).status_code == 200
    refused = []
    for path in ("/api/contents", "/api/contents/normlab-course/01_residuals.ipynb",
                 "/files/normlab-course/01_residuals.ipynb", "/api/kernels", "/api/terminals"):
        refused.append(requests.get(f"{hub.url}/user/{b}{path}", headers=token, timeout=30, allow_redirects=False))
        # straight to b's server, past the proxy
        port = hub.server_port(b)
        refused.append(requests.get(f"http://127.0.0.1:{port}/user/{b}{path}", headers=token, timeout=30,
                                    allow_redirects=False))
    refused.append(requests.get(f"{hub.url}/user/{a}/api/contents", timeout=30, allow_redirects=False,
                                headers={"Authorization": f"token {hub.tokens[b]}"}))     # and b's token on a's
    session = hub.login(a)                                     # a's browser cookie
    assert session.get(f"{hub.url}/user/{a}/lab", timeout=60).status_code == 200
    assert session.get(f"{hub.url}/user/{a}/api/contents", timeout=30).status_code == 200     # (her own: yes)
    refused.append(session.get(f"{hub.url}/user/{b}/lab", timeout=60))
    refused.append(session.get(f"{hub.url}/user/{b}/api/contents/normlab-course", timeout=30))
    assert all(r.status_code in (403, 404) for r in refused), [(r.url, r.status_code) for r in refused]


# The class service's checks (issue 39), on this hub: every test of tests/test_classroom_hub.py in its order
# there, collected here after the checks above and before the restart below, which replaces its restart
# test and covers their events too (pytest collects a module's tests in the order they are defined).
import test_classroom_hub as classroom  # noqa: E402

globals().update({name: test for name, test in vars(classroom).items() if name.startswith("test_")
                  and name != "test_a_killed_service_and_a_hub_restart_keep_every_event"})


def test_the_service_the_hub_and_a_server_restart_without_losing_a_byte_or_an_event(hub):
    import requests

    a = LEARNERS[0]
    headers = {"Authorization": f"token {hub.tokens[a]}"}
    url = f"{hub.url}/user/{a}/api/contents/normlab-course/01_residuals.ipynb"
    nb = requests.get(url, headers=headers, timeout=30).json()                # her note, saved by her server
    nb["content"]["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": NOTE})
    assert requests.put(url, json={"type": "notebook", "content": nb["content"]}, headers=headers,
                        timeout=30).status_code == 200
    before = {n: snapshot(hub.home(n)) for n in LEARNERS}
    assert all(".normlab/drills.json" in s for s in before.values())      # (after the kernels' writes)
    t0 = time.time()
    classroom.restart_the_service_and_the_hub(hub)             # every event kept (tests/test_classroom_hub.py)
    t1 = time.time()
    assert set(LEARNERS) <= set(hub.users())
    again = requests.get(url, headers=headers, timeout=30)                   # her server kept running
    assert again.status_code == 200 and NOTE in json.dumps(again.json(), ensure_ascii=False)
    hub.stop_server(a)
    hub.start_server(a, timeout=180)                                      # the start runs init again
    again = requests.get(url, headers=headers, timeout=30)
    assert again.status_code == 200 and NOTE in json.dumps(again.json(), ensure_ascii=False)
    after = {n: snapshot(hub.home(n)) for n in LEARNERS}
    assert after == before
    print(f"\n[hub accounts] accounts, teacher step and three first logins to ready servers: {hub.started:.1f} s "
          f"({', '.join(f'{k} at {v:.1f} s' for k, v in hub.phases.items())}); "
          f"service kill + hub restart {t1 - t0:.1f} s; a server's stop and start {time.time() - t1:.1f} s")
