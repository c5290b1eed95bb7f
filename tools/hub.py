"""A real JupyterHub on 127.0.0.1 for the course's tests and its class-size measurement (issue 29;
the measurement itself is tools/class_sizing.py).

Configuration at the top, one class that starts and stops the hub, and the three things a test does
with it: start a learner's server, log a learner in (cookie) or give them a token, and run code in a
learner's kernel through the server's own REST + websocket API.

FOR TESTS AND TRUSTED DEMOS ONLY. The hub authenticates with JupyterHub's ``DummyAuthenticator`` (one
shared password) and spawns with ``SimpleLocalProcessSpawner``: every learner's server runs as the SAME
OS user, so learners are isolated at the HTTP level only (the hub refuses learner A's cookie or token
on learner B's server), not from each other's files. A class needs per-user OS accounts (The Littlest
JupyterHub) or containers (Zero to JupyterHub): book/instructor.md and deploy/ say how.

Each learner's server runs the course's own venv (``jupyterhub-singleuser`` from it), in UTF-8 mode
with one torch thread per kernel (two kernels on two cores spin-wait against each other otherwise),
and its workspace is written by ``python -m normlab.course init`` in the spawner's pre-spawn hook:
the same code ``run.py course`` uses, which never overwrites a learner's work.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent          # the course's venv (tests run in it)
PASSWORD = "normlab-test"                        # DummyAuthenticator's shared password (tests only)
WORKSPACE = "normlab-course"                     # each learner's folder under their home
KERNEL_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUTF8": "1", "MPLBACKEND": "Agg"}
START_TIMEOUT = 60.0


class HubDidNotStart(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available() -> str | None:
    """None when a hub can start here, else why not (the reason a skipped test shows)."""
    for exe in ("jupyterhub", "jupyterhub-singleuser", "configurable-http-proxy"):
        if not (VENV_BIN / exe).exists():
            return f"{exe} is not installed in {VENV_BIN} (the 'test' extra installs jupyterhub and the proxy)"
    return None


def one_user_hub_or_skip(pytest) -> None:
    """For a test's one-user hub: pytest.skip with the reason where no hub can start here (pytest.fail under
    CI, whose 'test' extra installs jupyterhub and its proxy), and where the tests run as root, whose
    real-account hub (tools/hub_accounts.py, tests/test_hub_accounts.py) makes the same checks."""
    import hub_accounts

    why = available()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs jupyterhub and its proxy (the 'test' extra), but: {why}")
        pytest.skip(why)
    if hub_accounts.why_not() is None:
        pytest.skip("as root the real-account hub (tests/test_hub_accounts.py) makes these checks; "
                    "this one-user hub is for machines without root")


# Every test hub: addresses, state files, the login (JupyterHub's DummyAuthenticator: one shared password,
# TESTS ONLY), and the test's own service token (it adds learners, starts their servers, makes tokens,
# puts a teacher into a group as the admin page does).
BASE_CONFIG = '''\
c = get_config()  # noqa
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{state}/cookie_secret"
c.JupyterHub.pid_file = "{state}/hub.pid"
c.JupyterHub.cleanup_servers = False            # as TLJH: a hub restart leaves learners' servers (and kernels) running
c.ConfigurableHTTPProxy.command = ["{bin}/configurable-http-proxy"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.auth_token = "{proxy_token}"
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.authenticator_class = "dummy"      # TESTS ONLY: one shared password
c.DummyAuthenticator.password = "{password}"
c.Authenticator.allow_all = True
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.JupyterHub.services = [{{"name": "normlab-test", "api_token": "{service_token}"}}]
c.JupyterHub.load_roles = [{{"name": "normlab-test", "services": ["normlab-test"],
                            "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users", "groups"]}}]
'''

# The one-user hub's spawner: every learner's server runs as the hub's own OS user, from the course's venv.
ONE_USER_CONFIG = '''\
import sys
c.JupyterHub.spawner_class = "simple"           # TESTS ONLY: every learner is the same OS user
c.SimpleLocalProcessSpawner.home_dir_template = "{homes}/{{username}}"
c.Spawner.cmd = ["{bin}/jupyterhub-singleuser"]
c.Spawner.args = ["--allow-root"]
c.Spawner.notebook_dir = "{homes}/{{username}}/{workspace}"
c.Spawner.default_url = "/lab/tree/00_course_map.ipynb"
c.Spawner.environment = {kernel_env!r}


async def init_workspace(spawner):
    \"\"\"Each learner's own copy of the course, written before their server starts (never overwrites).
    A coroutine, so the hub keeps answering other learners while it runs.\"\"\"
    import asyncio
    home = spawner.home_dir
    proc = await asyncio.create_subprocess_exec(
        "{python}", "-m", "normlab.course", "init", home + "/{workspace}",
        env={{"HOME": home, "PATH": "{bin}", "PYTHONUTF8": "1", "OMP_NUM_THREADS": "1"}}, stdout=sys.stderr)
    if await proc.wait() != 0:
        raise RuntimeError("normlab.course init failed for " + spawner.user.name)


c.Spawner.pre_spawn_hook = init_workspace
'''


class Hub:
    """A JupyterHub in `state_dir` (its database, secrets and learners' homes live there)."""

    def __init__(self, state_dir: Path):
        self.state = Path(state_dir)
        self.homes = self.state / "homes"
        self.homes.mkdir(parents=True, exist_ok=True)
        self.port, self.hub_port, self.proxy_api_port = free_port(), free_port(), free_port()
        self.service_token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log_path = self.state / "hub.log"
        self.proxy_token = secrets.token_hex(16)
        self.env: dict[str, str] = {}                   # more environment for the hub (a subclass's)
        self.kernels: dict[str, str] = {}               # a learner's kernel kept by run_code(keep=True)
        (self.state / "jupyterhub_config.py").write_text(self.config(), encoding="utf-8")

    def config(self) -> str:
        """The hub's jupyterhub_config.py: BASE_CONFIG, then how it spawns (spawner_config)."""
        return BASE_CONFIG.format(
            port=self.port, hub_port=self.hub_port, proxy_api_port=self.proxy_api_port, state=self.state,
            bin=VENV_BIN, password=PASSWORD, proxy_token=self.proxy_token,
            service_token=self.service_token) + self.spawner_config()

    def spawner_config(self) -> str:
        """The one-user spawner (tools/hub_accounts.py's hub spawns as each learner's own account)."""
        return ONE_USER_CONFIG.format(bin=VENV_BIN, python=sys.executable, homes=self.homes, workspace=WORKSPACE,
                                      kernel_env=KERNEL_ENV)

    # ------------------------------------------------------------------------------- lifecycle
    def start(self) -> "Hub":
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "NORMLAB_"))}
        # The hub runs in C.UTF-8 whatever the caller's locale: under zh_CN.GBK, JupyterHub's database
        # migrations (alembic) rebuild the venv's path through the locale's encoding, and a venv in a folder
        # named in Chinese becomes mojibake ("Path doesn't exist: .../瀛︿範 璇剧▼/..."): the hub exits.
        env.update(PYTHONUTF8="1", LC_ALL="C.UTF-8", LANG="C.UTF-8",
                   PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", **self.env)
        log = open(self.log_path, "a", encoding="utf-8")
        self.proc = subprocess.Popen([str(VENV_BIN / "jupyterhub"), "-f", str(self.state / "jupyterhub_config.py")],
                                     cwd=self.state, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise HubDidNotStart(f"jupyterhub exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if self.api("GET", "/")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.3)
        raise HubDidNotStart(f"no answer from {self.url} in {START_TIMEOUT:.0f} s:\n{self.log_tail()}")

    def stop(self, servers: bool = False) -> None:
        """Stop the hub (and its proxy). With servers=True, stop every learner's server first."""
        if servers and self.proc and self.proc.poll() is None:
            for user in self.users():
                try:
                    self.stop_server(user, timeout=20)
                except HubDidNotStart:
                    pass
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])

    def __enter__(self) -> "Hub":
        return self.start()

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            self.kill_leftovers()

    def kill_leftovers(self) -> None:
        """Every process left of this hub: the proxy (its command line names state_dir) and the learners'
        servers, which the spawner started in their homes under state_dir (their command lines do not name
        it, so they are found by working directory). Linux /proc; elsewhere only the pkill."""
        import signal

        subprocess.run(["pkill", "-f", str(self.state)], capture_output=True)
        root = str(self.state.resolve())
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if os.readlink(proc / "cwd").startswith(root) and int(proc.name) != os.getpid():
                    os.kill(int(proc.name), signal.SIGTERM)
            except (OSError, ValueError):
                pass

    # ------------------------------------------------------------------------------- the REST API
    def api(self, method: str, path: str, token: str | None = None, body: dict | None = None) -> tuple[int, object]:
        import requests

        r = requests.request(method, f"{self.url}/hub/api{path}", json=body, timeout=30,
                             headers={"Authorization": f"token {token or self.service_token}"})
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text

    def users(self) -> list[str]:
        status, users = self.api("GET", "/users")
        return [u["name"] for u in users] if status == 200 else []

    def add_learner(self, name: str) -> None:
        self.api("POST", f"/users/{name}")

    def start_server(self, name: str, timeout: float = 90.0) -> None:
        self.start_servers([name], timeout)

    def start_servers(self, names, timeout: float = 90.0) -> None:
        """Start these learners' servers at once (as a class logging in together) and wait for all of them."""
        waiting = list(names)
        for name in waiting:
            self.api("POST", f"/users/{name}/server")
        deadline = time.time() + timeout
        while waiting and time.time() < deadline:
            time.sleep(0.3)
            status, users = self.api("GET", "/users?state=ready")            # one request for the class
            ready = {u["name"] for u in users} if status == 200 else set()
            waiting = [name for name in waiting if name not in ready]
        if waiting:
            raise HubDidNotStart(f"{', '.join(waiting)}: server not ready in {timeout:.0f} s:\n{self.log_tail()}")

    def stop_server(self, name: str, timeout: float = 60.0) -> None:
        self.kernels.pop(name, None)
        self.api("DELETE", f"/users/{name}/server")
        deadline = time.time() + timeout
        while time.time() < deadline:
            status, user = self.api("GET", f"/users/{name}")
            if status == 200 and not user.get("servers"):
                return
            time.sleep(0.3)
        raise HubDidNotStart(f"{name}'s server did not stop in {timeout:.0f} s")

    def token(self, name: str) -> str:
        status, out = self.api("POST", f"/users/{name}/tokens", body={"note": "normlab test", "expires_in": 3600})
        assert status in (200, 201), (status, out)
        return out["token"]

    def login(self, name: str):
        """A browser-like session of `name`, logged in through the hub's login form (cookie)."""
        import requests

        s = requests.Session()
        page = s.get(f"{self.url}/hub/login", timeout=30)
        xsrf = s.cookies.get("_xsrf") or ""
        r = s.post(f"{self.url}/hub/login?next=", data={"username": name, "password": PASSWORD, "_xsrf": xsrf},
                   timeout=30, allow_redirects=False)
        assert page.status_code == 200 and r.status_code in (302, 303), (page.status_code, r.status_code, r.text[:300])
        return s

    def home(self, name: str) -> Path:
        return self.homes / name

    # ------------------------------------------------------------------------------- a learner's kernel
    def run_code(self, name: str, token: str, cells: str | list[str], timeout: float = 600.0,
                 keep: bool = False) -> dict:
        """Start a kernel on `name`'s server (their REST API, their token), run `cells` one after another
        through the kernel's websocket (as JupyterLab's Run All does; stop at the first error), shut the
        kernel down. Returns {"stdout", "error", "seconds"}. With keep=True the kernel stays, and the next
        run_code(keep=True) of `name` runs in it (a learner's notebook left open: no second start)."""
        import requests
        import websocket

        cells = [cells] if isinstance(cells, str) else list(cells)
        base = f"{self.url}/user/{name}/api"
        headers = {"Authorization": f"token {token}"}
        kernel = self.kernels.get(name) if keep else None
        if kernel is None:
            r = requests.post(f"{base}/kernels", json={"name": "python3"}, headers=headers, timeout=60)
            assert r.status_code in (200, 201), (r.status_code, r.text[:300])
            kernel = r.json()["id"]
        for attempt in range(3):
            try:
                ws = websocket.create_connection(
                    f"ws://127.0.0.1:{self.port}/user/{name}/api/kernels/{kernel}/channels",
                    header=[f"Authorization: token {token}"], timeout=timeout)
                break
            except websocket.WebSocketBadStatusException as err:
                status = getattr(err, "status_code", None)
                # A busy machine: the proxy may time out the handshake (599), or the kernel died while it
                # started (404: its id is gone; JupyterLab would offer a new one, and so do we).
                if attempt == 2 or status not in (404, 599):
                    raise
                gone = requests.get(f"{base}/kernels/{kernel}", headers=headers, timeout=30).status_code == 404
                print(f"[hub] {name}: kernel channels answered {status} (kernel gone: {gone}), retrying",
                      file=sys.stderr)
                if gone:
                    r = requests.post(f"{base}/kernels", json={"name": "python3"}, headers=headers, timeout=60)
                    assert r.status_code in (200, 201), (r.status_code, r.text[:300])
                    kernel = r.json()["id"]
                time.sleep(1)
        out, error, session, t0 = [], None, uuid.uuid4().hex, time.time()
        try:
            for code in cells:
                error = self._execute(ws, name, session, code, out)
                if error:
                    break
        finally:
            ws.close()
            if keep:
                self.kernels[name] = kernel
            else:
                requests.delete(f"{base}/kernels/{kernel}", headers=headers, timeout=30)
        return {"stdout": "".join(out), "error": error, "seconds": time.time() - t0}

    @staticmethod
    def _execute(ws, name: str, session: str, code: str, out: list[str]) -> str | None:
        """One execute_request on the kernel's channels websocket; stream text goes to `out`; the error, if any."""
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": name, "session": session, "msg_type": "execute_request",
                       "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        error, replied, idle = None, False, False
        while not (replied and idle):
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                error = f"{msg['content']['ename']}: {msg['content']['evalue']}"
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        return error


def lesson_cells(home: Path, notebook: str) -> list[str]:
    """The code cells of a learner's own copy of a lesson (what Run All executes), then one that reports
    the kernel's peak resident memory."""
    import nbformat

    nb = nbformat.read(home / WORKSPACE / notebook, as_version=4)
    cells = [f"import os; os.chdir(os.path.expanduser('~/{WORKSPACE}'))"]
    cells += [c.source for c in nb.cells if c.cell_type == "code"]
    cells.append("import resource; print(f'RESULT peak_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}')")
    return cells
