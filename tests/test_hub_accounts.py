"""A class server with real OS accounts (issue 38): JupyterHub's real LocalProcessSpawner runs each
learner's server and kernels as that learner's own account, configured by the class recipe's own file
(deploy/tljh/normlab.py, loaded as TLJH loads it; only NORMLAB_USER_ENV, the folder of the course's
commands, differs from a TLJH server). Three learners are made for the test with `useradd` (one home is
"/home/张三 的家 …": Chinese characters and a space) and their homes opened to 0755, as plain `useradd -m`
leaves them on Debian, so nothing but the course's own file modes keeps their work private. A teacher
account gets the solutions through deploy/tljh/install.sh's teacher step, run as the admin would.

Checked: the server start writes each learner's workspace as that learner, owner-only; a learner's
kernel cannot open() another learner's workspace, answer file or ~/.normlab files, nor the teacher's
solutions; a learner's terminal has the course's python first (`python -m normlab.drills --help`);
cross-learner HTTP is refused (a token, a login cookie, and straight to the other server's port); the
hub and a server restart without losing a byte; the accounts are removed afterwards.

Needs root (useradd, a hub that spawns as other users): skipped with the reason elsewhere; the suite
runs as root on the course's machines and in CI. tests/test_hub.py's one-user hub runs everywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import hub as hubtool  # noqa: E402  (tools/hub.py)

RECIPE = ROOT / "deploy" / "tljh" / "normlab.py"
RUN = secrets.token_hex(3)                              # account names of this run only
HOMES = {f"nl{RUN}a": f"/home/nl{RUN}a", f"nl{RUN}b": f"/home/张三 的家 {RUN}", f"nl{RUN}c": f"/home/nl{RUN}c"}
LEARNERS = tuple(HOMES)
TEACHER = f"nl{RUN}t"
RUNUSER = shutil.which("runuser") or "runuser"
GOOD_LN = "import torch\nfrom torch import nn\nLayerNorm = nn.LayerNorm\n"

CONFIG = '''\
c = get_config()  # noqa
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{state}/cookie_secret"
c.JupyterHub.pid_file = "{state}/hub.pid"
c.JupyterHub.cleanup_servers = False            # as TLJH: a hub restart leaves the learners' servers running
c.ConfigurableHTTPProxy.command = ["{bin}/configurable-http-proxy"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.auth_token = "{proxy_token}"
c.JupyterHub.authenticator_class = "dummy"      # (TLJH: FirstUseAuthenticator; the login is not what is tested)
c.DummyAuthenticator.password = "{password}"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "localprocess"     # the real spawner: each server runs as its learner's account
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.JupyterHub.services = [{{"name": "normlab-test", "api_token": "{service_token}"}}]
c.JupyterHub.load_roles = [{{"name": "normlab-test", "services": ["normlab-test"],
                            "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users"]}}]
load_subconfig({recipe!r})                      # the class recipe itself (cmd, default_url, environment)
'''


def why_not() -> str | None:
    if not sys.platform.startswith("linux"):
        return "real OS accounts are made with useradd: Linux only (tests/test_hub.py's one-user hub runs here)"
    if os.geteuid() != 0:
        return ("needs root: it creates OS accounts (useradd) and runs a hub that spawns servers as them; "
                "tests/test_hub.py's one-user hub runs instead")
    for tool in ("useradd", "userdel", "runuser", "bash"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return hubtool.available()


def runs_for_others(python: str) -> bool:
    """Whether another account (nobody) can run `python` with the course's packages importable."""
    out = subprocess.run([RUNUSER, "-u", "nobody", "--", python, "-c", "import jupyterhub, torch, jupytext"],
                         capture_output=True, cwd="/", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    return out.returncode == 0


def user_environment(prefix: Path) -> Path:
    """TLJH's /opt/tljh/user: a Python environment every account can run, with the course's packages and
    its commands (normlab-course, jupyterhub-singleuser) in prefix/bin. The course's venv itself where
    other accounts can run its interpreter; else (the venv's interpreter under a 0700 /root, as on the
    course's machines) a venv of a system Python of the same version, whose site-packages include the
    course venv's (and whose etc/ and share/, Jupyter's configuration and data, are the venv's)."""
    if runs_for_others(sys.executable):
        prefix.mkdir(parents=True)
        (prefix / "bin").symlink_to(hubtool.VENV_BIN)
        return prefix / "bin"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = next((p for p in (f"/usr/bin/{version}", f"/usr/local/bin/{version}") if Path(p).exists()
                 and subprocess.run([RUNUSER, "-u", "nobody", "--", p, "-c", "1"], capture_output=True,
                                    cwd="/").returncode == 0), None)
    if base is None:
        pytest.skip(f"the course's interpreter ({sys.executable}) is not runnable by other accounts and there is "
                    f"no system {version} they can run")
    subprocess.run([base, "-m", "venv", "--without-pip", str(prefix)], check=True, capture_output=True)
    for shared in ("etc", "share"):             # Jupyter's config (server extensions: terminals, lab) and data
        if (hubtool.VENV_BIN.parent / shared).is_dir():
            (prefix / shared).symlink_to(hubtool.VENV_BIN.parent / shared)
    site = next((prefix / "lib").glob("python3*/site-packages"))
    import sysconfig
    (site / "normlab-course-env.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n", encoding="utf-8")
    for name, module in (("normlab-course", "normlab.course"), ("jupyterhub-singleuser", "jupyterhub.singleuser")):
        script = prefix / "bin" / name
        script.write_text(f"#!{prefix / 'bin' / 'python'}\nimport sys\nfrom {module} import main\n"
                          "sys.exit(main())\n", encoding="utf-8")
        script.chmod(0o755)
    subprocess.run(["chmod", "-R", "a+rX", str(prefix)], check=True)
    if not runs_for_others(str(prefix / "bin" / "python")):
        pytest.fail(f"the learners' environment {prefix} does not run for other accounts")
    return prefix / "bin"


class AccountsHub(hubtool.Hub):
    """tools/hub.py's hub with the real LocalProcessSpawner and the recipe's own configuration file."""

    def __init__(self, state: Path, user_env: Path):
        super().__init__(state)
        self.env = {"NORMLAB_USER_ENV": str(user_env), "PYTHONPATH": str(ROOT)}

    def config(self) -> str:
        return CONFIG.format(port=self.port, hub_port=self.hub_port, proxy_api_port=self.proxy_api_port,
                             state=self.state, bin=hubtool.VENV_BIN, password=hubtool.PASSWORD,
                             proxy_token=self.proxy_token, service_token=self.service_token, recipe=str(RECIPE))

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    def server_port(self, name: str) -> int:
        """The port `name`'s server listens on, from the proxy's routing table."""
        import requests

        routes = requests.get(f"http://127.0.0.1:{self.proxy_api_port}/api/routes", timeout=30,
                              headers={"Authorization": f"token {self.proxy_token}"}).json()
        target = next(r["target"] for key, r in routes.items() if key.rstrip("/") == f"/user/{name}")
        return int(target.rsplit(":", 1)[1].split("/")[0])


def private_repository(where: Path) -> Path:
    """What install.sh's teacher step needs of the repository, where only root reads it (as the guide says)."""
    repo = where / "repo"
    for rel in ("deploy/tljh/install.sh", "deploy/sizing.json", "book/glossary.md"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, repo / rel)
    shutil.copytree(ROOT / "notebooks", repo / "notebooks")
    return repo


def make_account(name: str, home: str) -> None:
    subprocess.run(["useradd", "--create-home", "--home-dir", home, name], check=True, capture_output=True)
    os.chmod(home, 0o755)                       # plain `useradd -m` on Debian: the worst case for privacy


def remove_accounts(names) -> list[str]:
    """End every process of these accounts (by pid), remove them and their homes; what could not be removed."""
    uids = {pwd.getpwnam(n).pw_uid: n for n in names if _exists(n)}
    for _ in range(3):
        pids = [int(p.name) for p in Path("/proc").glob("[0-9]*") if _uid_of(p) in uids]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not pids:
            break
        time.sleep(0.5)
    left = []
    for name in names:
        if _exists(name):
            home = pwd.getpwnam(name).pw_dir
            subprocess.run(["userdel", "--remove", name], capture_output=True)
            shutil.rmtree(home, ignore_errors=True)
            if _exists(name) or Path(home).exists():
                left.append(name)
    return left


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _uid_of(proc: Path) -> int | None:
    try:
        line = next(x for x in (proc / "status").read_text(encoding="utf-8").splitlines() if x.startswith("Uid:"))
        return int(line.split()[1])
    except (OSError, StopIteration, ValueError):
        return None


def snapshot(home: Path) -> dict[str, str]:
    """sha256 of every file the course keeps for a learner: the workspace and ~/.normlab."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in (home / "normlab-course", home / ".normlab") for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def hub():
    why = why_not()
    if why:
        pytest.skip(why)
    base = Path(tempfile.mkdtemp(prefix="normlab-accounts-"))
    base.chmod(0o755)                           # the learners run the environment inside it
    t0 = time.time()
    try:
        user_env = user_environment(base / "user")             # TLJH_PREFIX/user/bin, as on a TLJH server
        for name, home in {**HOMES, TEACHER: f"/home/nl{RUN}t"}.items():
            make_account(name, home)
        admin = base / "admin home"                            # the admin's HOME: install.sh must not use it
        admin.mkdir(mode=0o700)
        private = base / "root-only"
        private.mkdir(mode=0o700)
        repo = private_repository(private)
        teacher_step = subprocess.run(
            ["sh", str(repo / "deploy/tljh/install.sh"), "teacher", "t"], capture_output=True, text=True,
            encoding="utf-8", cwd=admin, timeout=300,
            env=dict(os.environ, HOME=str(admin), TLJH_PREFIX=str(base), NORMLAB_TEACHER_ACCOUNT=TEACHER))
        state = base / "hub"
        state.mkdir(mode=0o700)
        h = AccountsHub(state, user_env)
        h.teacher_step, h.admin = teacher_step, admin
        with h:
            for name in LEARNERS:
                h.add_learner(name)
            with ThreadPoolExecutor(len(LEARNERS)) as pool:    # three first logins at once
                list(pool.map(lambda n: h.start_server(n, timeout=180), LEARNERS))
            h.tokens = {name: h.token(name) for name in LEARNERS}
            h.started = time.time() - t0
            yield h
            h.stop(servers=True)
    finally:
        left = remove_accounts([*LEARNERS, TEACHER])
        shutil.rmtree(base, ignore_errors=True)
        assert not left, f"accounts left behind: {left}"


def test_the_server_start_writes_each_learners_workspace_as_theirs_and_private(hub):
    for name in LEARNERS:
        home, uid = hub.home(name), pwd.getpwnam(name).pw_uid
        ws = home / "normlab-course"
        assert (ws / "00_course_map.ipynb").is_file(), name
        assert not (home / "NORMLAB-INIT-FAILED.md").exists(), name
        for p in [ws, *ws.rglob("*")]:
            st = p.stat()
            assert st.st_uid == uid, (name, p)
            assert st.st_mode & 0o077 == 0, (name, p, oct(st.st_mode))
    assert str(hub.home(LEARNERS[1])).startswith("/home/张三 的家")


def peek_cell(others: list[Path], wait: float = 60.0) -> str:
    """A learner's own kernel: write an answer, check it (the drills CLI writes ~/.normlab/drills.json), save
    a guess (~/.normlab/predictions.json); then try to open() each of the other paths. An attempt counts
    once it is refused (PermissionError) or succeeds; a missing path is retried (another learner may not
    have written it yet) until `wait`, then reported as missing."""
    return f'''
import json, os, pathlib, subprocess, sys, time
os.chdir(os.path.expanduser("~/normlab-course"))
pathlib.Path("my_layernorm.py").write_text({GOOD_LN!r}, encoding="utf-8")
r = subprocess.run([sys.executable, "-m", "normlab.drills", "layernorm", "my_layernorm.py"], capture_output=True)
from normlab.course import predictions
e = predictions.entries("01")[0]
predictions.save_guess("01", e["id"], e["keys"][0])
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
print("DRILL", r.returncode)
print("RESULT", json.dumps(seen, ensure_ascii=False))
'''


def test_a_learners_kernel_cannot_open_another_learners_work_or_the_teachers_solutions(hub):
    assert hub.teacher_step.returncode == 0, hub.teacher_step.stdout + hub.teacher_step.stderr
    teacher_home = Path(pwd.getpwnam(TEACHER).pw_dir)
    solutions = teacher_home / "normlab-course" / "solutions"
    assert (solutions / "01_residuals.ipynb").is_file() and not list(hub.admin.iterdir())
    assert "return x + self.branch(x)" in (solutions / "01_residuals.ipynb").read_text(encoding="utf-8")

    def peek(name):
        others = []
        for other in LEARNERS:
            if other != name:
                h = hub.home(other)
                others += [h / "normlab-course/", h / "normlab-course/01_residuals.ipynb",
                           h / "normlab-course/my_layernorm.py", h / ".normlab/",
                           h / ".normlab/drills.json", h / ".normlab/predictions.json"]
        others += [solutions / "01_residuals.ipynb", solutions]
        return hub.run_code(name, hub.tokens[name], peek_cell(others))

    with ThreadPoolExecutor(len(LEARNERS)) as pool:
        results = dict(zip(LEARNERS, pool.map(peek, LEARNERS)))
    for name, r in results.items():
        assert r["error"] is None and "DRILL 0" in r["stdout"], (name, r)
        seen = json.loads(r["stdout"].split("RESULT ", 1)[1])
        assert len(seen) == 2 * 6 + 2 and set(seen.values()) == {"refused"}, (name, seen)
    for name in LEARNERS:                                     # (what they were refused exists, and is theirs)
        home = hub.home(name)
        for rel in ("normlab-course/my_layernorm.py", ".normlab/drills.json", ".normlab/predictions.json"):
            assert (home / rel).stat().st_uid == pwd.getpwnam(name).pw_uid, (name, rel)
        assert oct((home / ".normlab").stat().st_mode & 0o777) == "0o700"


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
    session = hub.login(a)                                     # a's browser cookie
    assert session.get(f"{hub.url}/user/{a}/lab", timeout=60).status_code == 200
    refused.append(session.get(f"{hub.url}/user/{b}/lab", timeout=60))
    refused.append(session.get(f"{hub.url}/user/{b}/api/contents/normlab-course", timeout=30))
    assert all(r.status_code in (403, 404) for r in refused), [(r.url, r.status_code) for r in refused]


def test_the_hub_and_a_server_restart_without_losing_a_byte(hub):
    import requests

    before = {n: snapshot(hub.home(n)) for n in LEARNERS}
    assert all(".normlab/drills.json" in s for s in before.values())      # (after the kernels' writes)
    t0 = time.time()
    hub.restart()
    t1 = time.time()
    assert set(LEARNERS) <= set(hub.users())
    a = LEARNERS[0]
    r = requests.get(f"{hub.url}/user/{a}/api/contents/normlab-course", timeout=30,
                     headers={"Authorization": f"token {hub.tokens[a]}"})
    assert r.status_code == 200                                          # her server kept running
    hub.stop_server(a)
    hub.start_server(a, timeout=180)                                      # the start runs init again
    after = {n: snapshot(hub.home(n)) for n in LEARNERS}
    assert after == before
    print(f"\n[hub accounts] accounts, teacher step and three first logins to ready servers: {hub.started:.1f} s; "
          f"hub restart {t1 - t0:.1f} s; a server's stop and start {time.time() - t1:.1f} s")
