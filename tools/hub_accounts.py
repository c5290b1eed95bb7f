"""A test hub with real OS accounts (issue 38): tools/hub.py's hub, spawning with JupyterHub's real
LocalProcessSpawner (each learner's server and kernels run as that learner's own account) and configured
by the class recipe's own file, deploy/tljh/normlab.py, loaded as TLJH loads it, with the class service
on (issue 39). What differs from a TLJH server: NORMLAB_USER_ENV (the folder of the course's commands,
TLJH's /opt/tljh/user/bin), the service's database and decks folder, and the login (the test hub's
shared password; TLJH's FirstUseAuthenticator is not what is tested). TLJH's own SystemdSpawner needs
systemd, which the course's machines lack.

Needs root on Linux (useradd, a hub that spawns as other users): ``why_not()`` says why not elsewhere.
FOR TESTS ONLY: it creates accounts and removes them (``remove_accounts``).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import hub as hubtool

ROOT = hubtool.ROOT
RECIPE = ROOT / "deploy" / "tljh" / "normlab.py"
RUNUSER = shutil.which("runuser") or "runuser"
# Every process of the class server runs in UTF-8 mode, as on a real server (whose locale is C.UTF-8 or
# en_US.UTF-8): a course in a folder named in Chinese stays importable whatever the caller's locale.
UTF8 = {"PYTHONUTF8": "1", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}


class Unavailable(RuntimeError):
    """This machine cannot run the real-account hub (the reason is the message)."""


def why_not() -> str | None:
    """None where the real-account hub can run, else why not. NORMLAB_ONE_USER_HUB=1 says no (as root too):
    the one-user hubs of tests/test_hub.py and tests/test_classroom_hub.py run instead."""
    if os.environ.get("NORMLAB_ONE_USER_HUB") == "1":
        return "NORMLAB_ONE_USER_HUB=1: the one-user hubs run instead"
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
    out = subprocess.run([RUNUSER, "-u", "nobody", "--", python, "-c", "import jupyterhub, jupytext, normlab.course"],
                         capture_output=True, cwd="/", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **UTF8})
    return out.returncode == 0


def let_others_pass(paths) -> list[tuple[Path, int]]:
    """The learners' servers run the course from this checkout and its venv (as a TLJH server runs them from
    /opt/tljh/user): each folder above ``paths`` that other accounts cannot pass through (a clone made in
    `mktemp -d`, mode 0700) gets o+x, passing only (no listing, no reading). Returns what to put back
    (``restore_modes``, at the end of the test)."""
    changed = []
    for path in paths:
        for folder in reversed(Path(path).resolve().parents):
            mode = stat.S_IMODE(folder.stat().st_mode)
            if not mode & stat.S_IXOTH and (folder, mode) not in changed:
                folder.chmod(mode | stat.S_IXOTH)
                changed.append((folder, mode))
    return changed


def restore_modes(changed: list[tuple[Path, int]]) -> None:
    for folder, mode in reversed(changed):
        folder.chmod(mode)


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
        raise Unavailable(f"the course's interpreter ({sys.executable}) is not runnable by other accounts and there "
                          f"is no system {version} they can run")
    subprocess.run([base, "-m", "venv", "--without-pip", str(prefix)], check=True, capture_output=True)
    for shared in ("etc", "share"):             # Jupyter's config (server extensions: terminals, lab) and data
        if (hubtool.VENV_BIN.parent / shared).is_dir():
            (prefix / shared).symlink_to(hubtool.VENV_BIN.parent / shared)
    # The course venv's site-packages, named by its path's bytes (hex): Python 3.11 reads a .pth file in the
    # locale's encoding even in UTF-8 mode (site.addpackage: encoding="locale"), so a checkout in a folder
    # named in Chinese, under zh_CN.GBK, became mojibake there and nothing of the course could be imported.
    purelib = os.fsencode(sysconfig.get_paths()["purelib"]).hex()
    site = next((prefix / "lib").glob("python3*/site-packages"))
    (site / "normlab-course-env.pth").write_text(
        f"import os, site; site.addsitedir(os.fsdecode(bytes.fromhex({purelib!r})))\n", encoding="ascii")
    for name, module in (("normlab-course", "normlab.course"), ("jupyterhub-singleuser", "jupyterhub.singleuser")):
        script = prefix / "bin" / name
        script.write_text(f"#!{prefix / 'bin' / 'python'}\nimport sys\nfrom {module} import main\n"
                          "sys.exit(main())\n", encoding="utf-8")
        script.chmod(0o755)
    subprocess.run(["chmod", "-R", "a+rX", str(prefix)], check=True)
    if not runs_for_others(str(prefix / "bin" / "python")):
        raise RuntimeError(f"the learners' environment {prefix} does not run for other accounts")
    return prefix / "bin"


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


class AccountsHub(hubtool.Hub):
    """tools/hub.py's hub with the real LocalProcessSpawner and the recipe's own configuration file, the
    class service on: its database `db` where a TLJH server keeps it (/srv/normlab/classroom.sqlite: a
    folder every account can enter, then the one the service makes), its lecture decks `decks`."""

    def __init__(self, state: Path, user_env: Path):
        super().__init__(state)
        srv = self.state.parent / "srv"
        srv.mkdir(mode=0o755, exist_ok=True)
        self.db, self.decks = srv / "normlab" / "classroom.sqlite", self.state / "decks"
        self.decks.mkdir(exist_ok=True)
        self.env = {"NORMLAB_USER_ENV": str(user_env), "PYTHONPATH": str(ROOT), "NORMLAB_CLASSROOM": "on",
                    "NORMLAB_CLASSROOM_DB": str(self.db), "NORMLAB_CLASSROOM_DECKS": str(self.decks),
                    "NORMLAB_CLASSROOM_PORT": str(hubtool.free_port())}     # another test run may hold 10101

    def spawner_config(self) -> str:
        return ('c.JupyterHub.spawner_class = "localprocess"     # the real spawner: each server runs as its learner\n'
                f"load_subconfig({str(RECIPE)!r})                 # the class recipe itself\n")

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    def server_port(self, name: str) -> int:
        """The port `name`'s server listens on, from the proxy's routing table."""
        import requests

        routes = requests.get(f"http://127.0.0.1:{self.proxy_api_port}/api/routes", timeout=30,
                              headers={"Authorization": f"token {self.proxy_token}"}).json()
        target = next(r["target"] for key, r in routes.items() if key.rstrip("/") == f"/user/{name}")
        return int(target.rsplit(":", 1)[1].split("/")[0])
