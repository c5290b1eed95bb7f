# The Littlest JupyterHub (TLJH): drop this file into /opt/tljh/config/jupyterhub_config.d/ and run
#     sudo tljh-config reload
# Each learner is a real OS account (jupyter-<name>) that TLJH creates: that is what keeps learners
# from reading each other's files. NOT RUN HERE (no systemd on the course's machines); its command
# line is tested by tests/test_deploy.py with the course's own venv in place of /opt/tljh/user.

USER_ENV = "/opt/tljh/user/bin"          # TLJH's shared user environment, where the course is installed

# Each server starts as the learner, after TLJH has made their account: first the course's own
# workspace command (writes only what is missing, never a learner's work), then the usual server.
# (A pre_spawn_hook would run as root, before the account exists.)
c.Spawner.cmd = [  # noqa: F821  (c is JupyterHub's config object)
    "/bin/sh", "-c",
    f'"{USER_ENV}/normlab-course" init "$HOME/normlab-course" && exec "{USER_ENV}/jupyterhub-singleuser" "$@"',
    "normlab-singleuser",                # $0 of the shell; JupyterHub's arguments follow as "$@"
]
c.Spawner.default_url = "/lab/tree/normlab-course/00_course_map.ipynb"  # noqa: F821
# One torch thread per kernel: many kernels share the cores (see the instructor guide's sizing table).
c.Spawner.environment = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUTF8": "1"}  # noqa: F821
# Memory and CPU per learner (systemd limits, TLJH applies them): from the measured sizing table.
c.SystemdSpawner.mem_limit = "2G"  # noqa: F821
c.SystemdSpawner.cpu_limit = 1.0  # noqa: F821

# ---- The class service (issue 39): live prediction polls and the teacher's view. Its configuration is
# written by the course itself (normlab/classroom/hubconfig.py); its SQLite file stays on the server's
# disk across restarts. Teachers: members of the hub group "normlab-teachers" (the hub's admin page).
import os as _os  # noqa: E402
import subprocess as _subprocess  # noqa: E402

if _os.path.exists(f"{USER_ENV}/python"):
    exec(_subprocess.run([f"{USER_ENV}/python", "-m", "normlab.classroom.hubconfig", "--python", f"{USER_ENV}/python",
                          "--db", "/srv/normlab/classroom.sqlite"], check=True, capture_output=True, text=True).stdout)
else:
    print(f"normlab: no {USER_ENV}/python, the class service is not configured")
# ---- end of the class service ----
