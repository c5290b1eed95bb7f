"""The class service's parts without a hub (issue 39): what a post may hold, the SQLite store, the kernel's
client when there is no service or it does not answer. The service on a real hub: test_classroom_hub.py.
Cost: ~4 s, plus ~5 s for the one test that runs an exercise check and a drill check (torch)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from normlab.course import predictions
from normlab.classroom import events, hubconfig
from normlab.classroom.store import Store, grid_csv

ROOT = Path(__file__).resolve().parent.parent
GUESS = {"kind": "guess", "lesson": "01", "id": "depth-std", "choice": "B"}


def body(obj) -> bytes:
    return json.dumps(obj).encode("utf-8")


def test_a_good_post_is_parsed_into_the_stores_shape():
    assert events.parse(body(GUESS)) == [{"kind": "guess", "lesson": "01", "item": "depth-std", "choice": "B"}]
    check = {"kind": "check", "id": "03.2", "passed": False, "findings": ["eps_outside"]}
    drill = {"kind": "drill", "card": "layernorm", "level": "production", "passed": True, "seconds": 61}
    parsed = events.parse(body([check, drill]))
    assert parsed[0]["lesson"] == "03" and parsed[0]["item"] == "03.2"
    assert parsed[1] == {"kind": "drill", "lesson": "08", "item": "layernorm", "level": "production",
                         "passed": True, "seconds": 61.0}


@pytest.mark.parametrize("bad, says", [
    (b"\xff\xfe", "UTF-8"), (b"[1,", "JSON"), (b"[]", "1 到 100"), (body([GUESS] * 101), "1 到 100"),
    (body({**GUESS, "choice": "D"}), "选项"), (body({**GUESS, "id": "nope"}), "没有这个预测题"),
    (body({**GUESS, "user": "someone-else"}), "未知字段"), (body({"kind": "guess"}), "缺少字段"),
    (body({**GUESS, "lesson": 1}), "类型不对"), (body({"kind": "check", "id": "02.1", "passed": 1, "findings": []}), "类型不对"),
    (body({"kind": "drill", "card": "x", "level": "interview", "passed": True, "seconds": float("inf")}), "seconds"),
    (body([GUESS, {**GUESS, "choice": "Z"}]), "第 2 个事件"), (b" " * (events.MAX_BODY + 1), "太大"),
])
def test_a_bad_post_is_refused_with_a_reason(bad, says):
    with pytest.raises(events.Malformed, match=says):
        events.parse(bad)


def test_the_store_is_wal_and_keeps_every_event_across_a_reopen(tmp_path):
    path = tmp_path / "课堂 db" / "c.sqlite"
    store = Store(path)
    assert store.journal_mode() == "wal"
    keys = predictions.entry("01", "depth-std")["keys"]
    for user, choice in [("a", "A"), ("b", "B"), ("a", "C"), ("t", "A")]:      # a changes their mind
        store.add(user, events.parse(body({**GUESS, "choice": choice}))[0])
    store.seen("t", teacher=True)
    store.seen("a")
    store.seen("b")
    store.close()
    again = Store(path)                          # a restart: a new connection to the same file
    assert again.count() == 4
    # the latest guess per learner, teachers left out: checked against a plain SQL count of the raw rows
    assert again.distribution("01", "depth-std", keys) == {"counts": {"A": 0, "B": 1, "C": 1}, "n": 2}
    with sqlite3.connect(path) as raw:
        latest = dict(raw.execute("SELECT user, choice FROM events WHERE id IN (SELECT MAX(id) FROM events GROUP BY user)"))
    assert latest == {"a": "C", "b": "B", "t": "A"}
    assert again.present() == 2 and again.guessed("a", "01", "depth-std") == "C"
    assert [e["choice"] for e in again.record("a")] == ["A", "C"]


def test_the_stores_files_are_the_service_accounts_only(tmp_path):
    """On a class server every learner has a shell: the events of all of them must not be readable by them
    (issue 39's privacy), whatever the umask. Checked with the umask a root shell has (022)."""
    old = os.umask(0o022)
    try:
        store = Store(tmp_path / "srv" / "normlab" / "classroom.sqlite")
        store.add("a", events.parse(body(GUESS))[0])
        files = sorted(store.path.parent.iterdir())
        assert [f.name for f in files][:1] == ["classroom.sqlite"] and any(f.name.endswith("-wal") for f in files)
        assert {f.name: oct(f.stat().st_mode & 0o777) for f in files} == {f.name: "0o600" for f in files}
        assert oct(store.path.parent.stat().st_mode & 0o777) == "0o700"
        store.close()
    finally:
        os.umask(old)


def test_a_failed_batch_stores_none_of_it(tmp_path):
    store = Store(tmp_path / "c.sqlite")
    good = events.parse(body(GUESS))[0]
    with pytest.raises(sqlite3.IntegrityError):
        store.add_many("a", [good, {**good, "lesson": None}])             # the second row breaks NOT NULL
    assert store.count() == 0


def test_the_grid_counts_per_learner_and_lesson_and_exports_csv(tmp_path):
    store = Store(tmp_path / "c.sqlite")
    store.add_many("a", events.parse(body([GUESS, {"kind": "check", "id": "02.1", "passed": False, "findings": ["x"]},
                                           {"kind": "check", "id": "02.1", "passed": True, "findings": []},
                                           {"kind": "check", "id": "02.2", "passed": False, "findings": ["y"]}])))
    rows = {(r["user"], r["lesson"]): r for r in store.grid()}
    assert rows[("a", "01")]["guessed"] == 1
    assert (rows[("a", "02")]["exercises_passed"], rows[("a", "02")]["exercises_tried"]) == (1, 2)
    text = grid_csv(store.grid())
    assert text.splitlines()[0] == "user,lesson,guessed,prompts,exercises_passed,exercises_tried,cards_passed,cards_tried,last"
    assert text.splitlines()[2].startswith("a,02,0,,1,2,0,0,")


CLIENT = """
import json, logging, os, sys, time
from pathlib import Path
from normlab.course import predictions
from normlab.classroom import client
listening = client.install()
t0 = time.perf_counter()
predictions.save_guess("01", "depth-std", "B")
took = time.perf_counter() - t0
print(json.dumps({"listening": listening, "took": took, "flushed": client.flush(0.5), "status": client.status(),
                  "saved": predictions.load_guesses().get("01.depth-std", {}).get("choice"),
                  "root_handlers": len(logging.getLogger().handlers)}))
"""


def run_client(tmp_path, **env) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "NORMLAB_CLASSROOM"))}
    base.update(PYTHONPATH=str(ROOT), PYTHONUTF8="1", NORMLAB_PREDICTIONS=str(tmp_path / "p.json"), **env)
    out = subprocess.run([sys.executable, "-c", CLIENT], env=base, capture_output=True, text=True, encoding="utf-8",
                         timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return json.loads(out.stdout)


def test_without_the_service_nothing_listens_and_nothing_changes(tmp_path):
    said = run_client(tmp_path)
    assert said["listening"] is False and said["flushed"] is False and said["saved"] == "B"
    assert "没有连接班级服务" in said["status"]


def test_a_service_that_does_not_answer_costs_no_wait_and_queues(tmp_path):
    import socket

    with socket.socket() as s:                   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    said = run_client(tmp_path, NORMLAB_CLASSROOM_URL=f"http://127.0.0.1:{port}/services/x/", JUPYTERHUB_API_TOKEN="t")
    assert said["listening"] is True and said["saved"] == "B"
    assert said["took"] < 0.05, said                      # the guess is saved; the post waits in its thread
    assert said["flushed"] is False and "队列中 (queued) 1" in said["status"], said


def _value(x, initial):
    """A traitlets config value as JupyterHub sees it (an .append/.update on an unset one is lazy)."""
    return x.get_value(initial) if hasattr(x, "get_value") else x


def _load(source: str, **names):
    from traitlets.config import Config

    c = Config()
    exec(compile(source, "jupyterhub_config.py", "exec"), {"c": c, **names})   # as JupyterHub loads its config
    return c


def _service(c, spawner="Spawner") -> tuple[dict, dict, list]:
    [svc] = _value(c.JupyterHub.services, [])
    return svc, _value(c[spawner].environment, {}), _value(c[spawner].server_token_scopes, [])


def test_the_hub_configuration_names_one_service_and_its_scopes():
    c = _load(hubconfig.config_text("/opt/py", "/srv/c.sqlite", port=10123, teachers=["t"]))
    svc, env, scopes = _service(c)
    assert svc["command"] == ["/opt/py", "-m", "normlab.classroom.service", "--db", "/srv/c.sqlite"]
    assert svc["oauth_client_allowed_scopes"] == [hubconfig.TEACH_SCOPE] and svc["url"] == "http://127.0.0.1:10123"
    assert hubconfig.ACCESS in scopes
    assert env["NORMLAB_CLASSROOM_URL"] == "http://127.0.0.1:10123/services/normlab-classroom/"
    assert Path(env["PYTHONSTARTUP"]).is_file()
    assert c.JupyterHub.load_groups == {hubconfig.TEACHERS_GROUP: {"users": ["t"]}}
    roles = {r["name"]: r for r in _value(c.JupyterHub.load_roles, [])}
    assert roles["user"]["scopes"] == ["self", hubconfig.ACCESS] and roles["normlab-teacher"]["groups"] == [hubconfig.TEACHERS_GROUP]


def test_both_deployment_recipes_run_the_service_with_its_file_on_a_lasting_disk():
    """TLJH's config file and Z2JH's extraConfig, executed as their hubs would (the course's venv stands in
    for the hub's Python); the Z2JH database is on the hub's persistent volume, /srv/jupyterhub."""
    import yaml

    tljh = (ROOT / "deploy" / "tljh" / "normlab.py").read_text(encoding="utf-8")
    os.environ.update(NORMLAB_USER_ENV=str(Path(sys.executable).parent), NORMLAB_CLASSROOM="on")
    try:
        c = _load(tljh)
    finally:
        del os.environ["NORMLAB_USER_ENV"], os.environ["NORMLAB_CLASSROOM"]
    svc, env, _ = _service(c)
    assert svc["command"][-4:] == ["--db", "/srv/normlab/classroom.sqlite", "--decks", "/srv/normlab/slides"]
    assert env["OMP_NUM_THREADS"] == "1"
    values = yaml.safe_load((ROOT / "deploy" / "z2jh" / "values.yaml").read_text(encoding="utf-8"))
    c = _load(values["hub"]["extraConfig"]["normlab-classroom"])
    svc, env, scopes = _service(c, "KubeSpawner")
    assert svc["command"][-1].startswith("/srv/jupyterhub/") and svc["url"] == "http://hub:10101"
    assert env["NORMLAB_CLASSROOM_URL"] == "http://hub:10101/services/normlab-classroom/" and hubconfig.ACCESS in scopes
    assert {"name": "normlab-classroom", "port": 10101, "targetPort": 10101} in values["hub"]["service"]["extraPorts"]
    assert values["singleuser"]["extraEnv"]["OMP_NUM_THREADS"] == "1"        # the course's own part still there


def test_the_instructor_guide_quotes_the_benchmark_as_recorded():
    """book/instructor.md's poll section: its load numbers are tools/bench_classroom.json's (rerun the
    benchmark with --out tools/bench_classroom.json and the guide must follow)."""
    guide = (ROOT / "book" / "instructor.md").read_text(encoding="utf-8")
    section = guide.split("### 课堂投票", 1)[1].split("\n## ", 1)[0]
    bench = json.loads((ROOT / "tools" / "bench_classroom.json").read_text(encoding="utf-8"))
    cold, warm = bench["rounds"]
    assert bench["events_in_store"] == bench["expected"] and warm["stored_200"] == warm["learners"] == 40
    quoted = [f"{warm['teacher_sees_all_ms']} ms 内显示全部 40 人", f"中位数 {warm['post_median_ms']} ms",
              f"最慢 {warm['post_max_ms']} ms", f"全部显示用了 {cold['teacher_sees_all_ms']} ms", "40 / 40"]
    assert all(q in section for q in quoted), [q for q in quoted if q not in section]


def test_exercise_checks_and_drill_reports_log_events_the_service_accepts(monkeypatch):
    """The two other recording places (exercises.check, a recorded drill check) hand the client events
    that pass the service's own checks (events.parse), with the report's verdict and failed finding ids."""
    import logging

    import torch

    from normlab import drills, exercises

    got = []

    class Catch(logging.Handler):
        def emit(self, record):
            got.append(record.normlab_event)

    log = logging.getLogger("normlab.events")
    handler, level = Catch(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    monkeypatch.setenv("NORMLAB_DRILLS_FILE", "off")                   # no progress file written
    try:
        def blank(*args, **kwargs):
            raise NotImplementedError

        report = exercises.check("02.1", blank)
        drill = drills.check("layernorm", torch.nn.LayerNorm, record=True)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    check_event, drill_event = got
    assert check_event == {"kind": "check", "id": "02.1", "passed": False, "findings": [f.id for f in report.failed]}
    assert drill_event["card"] == "layernorm" and drill_event["passed"] == drill.passed_at()
    parsed = events.parse(body(got))
    assert [e["kind"] for e in parsed] == ["check", "drill"] and parsed[0]["findings"] == ["not_written"]


def test_the_choice_widget_names_the_service_only_under_a_hub_that_runs_it(monkeypatch):
    """predict.Ask's `classroom` trait (what makes web/predict.js load the service's front end): the
    service's path through the hub's proxy where the hub's configuration put NORMLAB_CLASSROOM_URL in a
    single-user server's environment; "" on one machine, in the book's executor and on a hub without it
    (web/predict.js then requests nothing: tests/test_classroom_hub.py's browser test checks that)."""
    from normlab.widgets import predict

    url = f"http://127.0.0.1:10101/services/{hubconfig.SERVICE_NAME}/"       # hubconfig's text sets this
    assert f'"NORMLAB_CLASSROOM_URL": "http://{{host}}:{{port}}/services/{{name}}/"' in hubconfig.TEMPLATE
    hub = {"JUPYTERHUB_SERVICE_PREFIX": "/user/ana/", "JUPYTERHUB_BASE_URL": "/"}
    assert predict.classroom_base({**hub, "NORMLAB_CLASSROOM_URL": url}) == f"/services/{hubconfig.SERVICE_NAME}/"
    assert predict.classroom_base({**hub, "JUPYTERHUB_BASE_URL": "/课/", "NORMLAB_CLASSROOM_URL": url}) == \
        f"/课/services/{hubconfig.SERVICE_NAME}/"
    assert predict.classroom_base(hub) == ""                                  # a hub without the service
    assert predict.classroom_base({"NORMLAB_CLASSROOM_URL": url}) == ""       # not a hub's single-user server
    assert predict.classroom_base({**hub, "NORMLAB_CLASSROOM_URL": url, "NORMLAB_STATIC": "1"}) == ""  # the book
    for name in ("NORMLAB_CLASSROOM_URL", "JUPYTERHUB_SERVICE_PREFIX", "JUPYTERHUB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NORMLAB_PREDICT_WAIT", "0")
    widget = predict.Ask("01", predictions.entries("01")[0]["id"])
    assert widget.classroom == "" and widget.get_state()["classroom"] == ""   # one machine: no trait value
    monkeypatch.setenv("NORMLAB_CLASSROOM_URL", url)
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/ana/")
    assert predict.Ask("01", predictions.entries("01")[0]["id"]).get_state()["classroom"] == \
        f"/services/{hubconfig.SERVICE_NAME}/"
