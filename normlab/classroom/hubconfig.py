"""The hub's configuration for the class service, as text to append to a jupyterhub_config.py (issue 39).

    python -m normlab.classroom.hubconfig --python /opt/tljh/user/bin/python --db /srv/normlab/classroom.sqlite

One source for every hub that runs the service: the test hub (tools/bench_classroom.py's ClassHub),
TLJH (deploy/tljh/normlab.py runs this command with the learners' environment and ``exec``s its output)
and Zero to JupyterHub (deploy/z2jh/values.yaml's hub.extraConfig does the same in the hub's pod); both
are executed by tests/test_classroom.py. It

* starts the service with the hub (``c.JupyterHub.services``: the hub restarts it if it exits);
* lets every user reach it (the ``user`` role gains ``access:services!service=normlab-classroom``) and
  gives each learner's server token that one scope more (``Spawner.server_token_scopes``), so a kernel
  posts with ``$JUPYTERHUB_API_TOKEN`` as its learner and as nobody else;
* defines TEACH_SCOPE and gives it to the group ``normlab-teachers`` (members: ``--teacher NAME``, or the
  hub's admin page); the service's OAuth client may carry it, so a teacher's browser has it;
* tells each learner's kernel where the service is (NORMLAB_CLASSROOM_URL) and to install the client
  at start (PYTHONSTARTUP -> normlab/classroom/startup.py; IPython kernels run it, like `python`'s REPL).
"""

from __future__ import annotations

import argparse
from pathlib import Path

SERVICE_NAME = "normlab-classroom"               # = service.SERVICE_NAME (this module imports no tornado)
TEACH_SCOPE = "custom:normlab-classroom:teach"   # = service.TEACH_SCOPE
TEACHERS_GROUP = "normlab-teachers"
ACCESS = f"access:services!service={SERVICE_NAME}"
STARTUP = Path(__file__).resolve().with_name("startup.py")

TEMPLATE = '''
# ---- normlab classroom service (issue 39; written by python -m normlab.classroom.hubconfig) ----
c.JupyterHub.services.append({{
    "name": "{name}",
    "url": "http://{host}:{port}",
    "command": {command!r},
    "environment": {service_env!r},
    "oauth_client_allowed_scopes": ["{teach}"],
    "oauth_no_confirm": True,
    "display": True,
}})
c.JupyterHub.custom_scopes = {{"{teach}": {{"description": "NormLab: read the class's guesses and progress, reveal answers"}}}}
c.JupyterHub.load_groups = {{"{group}": {{"users": {teachers!r}}}}}
c.JupyterHub.load_roles.append({{"name": "user", "scopes": ["self", "{access}"]}})
c.JupyterHub.load_roles.append({{"name": "normlab-teacher", "scopes": ["{teach}", "{access}"], "groups": ["{group}"]}})
c.{spawner}.server_token_scopes = ["users:activity!user", "access:servers!server", "{access}"]
c.{spawner}.environment.update({{"NORMLAB_CLASSROOM_URL": "http://{host}:{port}/services/{name}/",
                              "PYTHONSTARTUP": {startup!r}}})
# ---- end of the normlab classroom service ----
'''


def config_text(python: str, db: str, port: int = 10101, host: str = "127.0.0.1", teachers: list[str] = (),
                startup: str | None = None, service_env: dict | None = None, spawner: str = "Spawner",
                decks: str | None = None) -> str:
    """The fragment to append to a jupyterhub_config.py (after its own ``c.Spawner.environment = ...``).
    ``host``: how the learners' servers reach the service (127.0.0.1 on one machine, the hub's Kubernetes
    service "hub" in Z2JH, where the service listens on every interface); ``spawner``: the class whose
    environment the hub's other configuration sets (KubeSpawner in Z2JH); ``decks``: the built lecture
    decks (build/slides) the service shows teachers with the class's bars."""
    command = [str(python), "-m", "normlab.classroom.service", "--db", str(db)] + (["--decks", str(decks)] if decks else [])
    return TEMPLATE.format(name=SERVICE_NAME, host=host, spawner=spawner, port=int(port), command=command,
                           teach=TEACH_SCOPE, group=TEACHERS_GROUP, teachers=list(teachers), access=ACCESS,
                           startup=str(startup or STARTUP), service_env={"PYTHONUTF8": "1", **(service_env or {})})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", required=True, help="the Python that has normlab (the learners' environment)")
    ap.add_argument("--db", required=True, help="the service's SQLite file, on a disk that survives restarts")
    ap.add_argument("--port", type=int, default=10101)
    ap.add_argument("--host", default="127.0.0.1", help="the service's host name as the learners' servers see it")
    ap.add_argument("--spawner", default="Spawner", help="the spawner class to configure (KubeSpawner in Z2JH)")
    ap.add_argument("--decks", help="the built lecture decks (build/slides) to show teachers with the class's bars")
    ap.add_argument("--teacher", action="append", default=[], help="a teacher's hub user name (repeatable)")
    args = ap.parse_args(argv)
    print(config_text(args.python, args.db, args.port, args.host, args.teacher, spawner=args.spawner,
                      decks=args.decks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
