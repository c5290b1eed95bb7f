# The Littlest JupyterHub (TLJH): the course's part of the hub's configuration. deploy/tljh/install.sh
# copies it into /opt/tljh/config/jupyterhub_config.d/ and runs `tljh-config reload`.
# Each learner is a real OS account (jupyter-<name>) that TLJH creates; on top of that the course keeps
# every file it writes owner-only (0700 folders, 0600 files), whatever the home's mode.
# Tested for real by tests/test_hub_accounts.py: this very file, loaded by a JupyterHub with the real
# LocalProcessSpawner and three OS accounts (TLJH's own SystemdSpawner needs systemd, which the course's
# machines lack); the only difference there is NORMLAB_USER_ENV, the folder of the course's commands.
#
# Memory and CPU limits are NOT set here: TLJH's own `tljh-config set limits.memory / limits.cpu` set them
# (install.sh does, from deploy/sizing.json); a value set in this file would silently win over tljh-config.
import os

USER_ENV = os.environ.get("NORMLAB_USER_ENV", "/opt/tljh/user/bin")   # TLJH's user environment
FAILURE_NOTE = "NORMLAB-INIT-FAILED.md"     # normlab.course.FAILURE_NOTE: why the workspace is missing

# A learner's server starts as the learner, after TLJH has made their account (a pre_spawn_hook would
# run as root, before the account exists):
#  * umask 077: whatever the server and the kernels write (notebooks, IPython's history) is theirs only;
#  * the course's workspace (writes only what is missing, never a learner's work). If that fails, the
#    server starts anyway and opens ~/NORMLAB-INIT-FAILED.md, which says why (the log has the traceback);
#  * the course's commands first on PATH, and terminals that keep it: JupyterLab's default terminal is
#    a login shell, and Debian's /etc/profile resets PATH (no `python` there); a plain interactive bash
#    inherits the server's PATH, so `python -m normlab.drills` works in a learner's terminal.
# No braces, no "${" and no "$$" in it: TLJH's SystemdSpawner passes every word of the command through
# str.format(USERNAME=..., USERID=...) (jupyterhub/systemdspawner@2f6bde8a, v1.0.2, systemdspawner.py:
# `cmd=[self._expand_user_vars(c) for c in self.cmd]`; a "{ ...; }" group raised KeyError and no learner's
# server started), and systemd's ExecStart= expands "${NAME}" and turns "$$" into "$" (systemd.service(5)).
SERVER_START = (
    "umask 077; "
    f'if ! "{USER_ENV}/normlab-course" init "$HOME/normlab-course" --at-server-start; then '
    f'[ -f "$HOME/{FAILURE_NOTE}" ] || echo "normlab-course init failed at the server start: see the server log. '
    f'课程工作区没有准备好，请告诉老师。" > "$HOME/{FAILURE_NOTE}"; '
    f"export JUPYTERHUB_DEFAULT_URL=/lab/tree/{FAILURE_NOTE}; fi; "
    f'export PATH="{USER_ENV}:$PATH"; '
    f'exec "{USER_ENV}/jupyterhub-singleuser" --ServerApp.terminado_settings=shell_command=/bin/bash "$@"'
)
c.Spawner.cmd = ["/bin/sh", "-c", SERVER_START, "normlab-singleuser"]  # noqa: F821  ($0; JupyterHub's args follow as "$@")
c.Spawner.default_url = "/lab/tree/normlab-course/00_course_map.ipynb"  # noqa: F821
# One torch thread per kernel: many kernels share the cores (the sizing in deploy/sizing.json).
c.Spawner.environment = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUTF8": "1"}  # noqa: F821

# ---- The class service (issue 39): live prediction polls and the teacher's view. Its configuration is
# written by the course itself (normlab/classroom/hubconfig.py); its SQLite file stays on the server's
# disk across restarts. Teachers: members of the hub group "normlab-teachers" (the hub's admin page).
# The lecture decks with the class's bars: the built slides (`python3 run.py slides` -> build/slides/)
# copied to /srv/normlab/slides (NORMLAB_CLASSROOM_DECKS elsewhere). The service listens on 127.0.0.1:10101
# (NORMLAB_CLASSROOM_PORT if that port is taken).
# On where TLJH is installed (/opt/tljh), or wherever NORMLAB_CLASSROOM=on; NORMLAB_CLASSROOM=off turns it off.
import subprocess  # noqa: E402

if os.environ.get("NORMLAB_CLASSROOM", "on" if os.path.isdir("/opt/tljh") else "off") == "on":
    exec(subprocess.run([f"{USER_ENV}/python", "-m", "normlab.classroom.hubconfig", "--python", f"{USER_ENV}/python",
                         "--db", os.environ.get("NORMLAB_CLASSROOM_DB", "/srv/normlab/classroom.sqlite"),
                         "--decks", os.environ.get("NORMLAB_CLASSROOM_DECKS", "/srv/normlab/slides"),
                         "--port", os.environ.get("NORMLAB_CLASSROOM_PORT", "10101")],
                        check=True, capture_output=True, text=True, encoding="utf-8",
                        env=dict(os.environ, PYTHONUTF8="1")).stdout)
# ---- end of the class service ----
