"""The class service under a lecture's load (issue 39): K learners guess within the same second.

    python3 tools/bench_classroom.py                 # 40 learners, two prompts -> a table and build/bench_classroom.json
    python3 tools/bench_classroom.py --learners 80

A real test hub (tools/hub.py) runs the service exactly as in a class (normlab/classroom/hubconfig.py).
Each simulated learner holds their own hub token (as a kernel holds its server's token) and posts one guess;
all K posts leave at the same instant (a barrier), while the teacher's view polls the prompt's
distribution every 50 ms. Two rounds: "first contact" (the service has never seen these tokens: each one
costs a lookup at the hub) and "warm" (as in a lecture, where each kernel said hello when it started).

Measured: every post's answer time, whether all K were stored (the teacher's n and the store's own count),
and how long after the burst started the teacher's view showed all K. A benchmark, not a test: the numbers
depend on the machine and what else runs on it; book/instructor.md quotes them with the machine.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import hub as hubtool  # noqa: E402
from normlab.classroom import hubconfig  # noqa: E402

PREFIX = f"/services/{hubconfig.SERVICE_NAME}/"
TEACHER = "teacher"


class ClassHub(hubtool.Hub):
    """tools/hub.py's test hub with the class service in its configuration (hubconfig.config_text's text,
    as TLJH's config file appends it)."""

    def __init__(self, state_dir: Path, extra_config: str):
        self.extra_config = extra_config
        super().__init__(state_dir)

    def config(self) -> str:
        return super().config() + self.extra_config


def burst(hub, tokens: dict[str, str], teacher_token: str, lesson: str, pid: str, keys: str) -> dict:
    """All learners post a guess of lesson.pid at once; the teacher polls until n == K."""
    import requests

    names = list(tokens)
    barrier = threading.Barrier(len(names) + 1)
    seen = {}

    def post(i_name):
        i, name = i_name
        s = requests.Session()
        s.headers["Authorization"] = f"token {tokens[name]}"
        event = {"kind": "guess", "lesson": lesson, "id": pid, "choice": keys[i % len(keys)]}
        barrier.wait()
        t0 = time.perf_counter()
        r = s.post(hub.url + PREFIX + "api/events", json=event, timeout=30)
        return r.status_code, time.perf_counter() - t0

    def teacher(start):
        s = requests.Session()
        s.headers["Authorization"] = f"token {teacher_token}"
        while time.perf_counter() - start[0] < 30:
            r = s.get(hub.url + PREFIX + f"api/poll/{lesson}/{pid}", timeout=30).json()
            if r["n"] >= len(names):
                seen["n"], seen["at"], seen["counts"] = r["n"], time.perf_counter() - start[0], r["counts"]
                return
            time.sleep(0.05)

    with ThreadPoolExecutor(len(names) + 1) as pool:
        futures = [pool.submit(post, (i, n)) for i, n in enumerate(names)]
        barrier.wait()
        start = [time.perf_counter()]
        watcher = pool.submit(teacher, start)
        answers = [f.result() for f in futures]
        all_answered = time.perf_counter() - start[0]
        watcher.result()
    latencies = sorted(t for _, t in answers)
    return {"prompt": f"{lesson}.{pid}", "learners": len(names), "stored_200": sum(s == 200 for s, _ in answers),
            "post_median_ms": round(statistics.median(latencies) * 1000), "post_p90_ms": round(latencies[int(0.9 * len(latencies)) - 1] * 1000),
            "post_max_ms": round(latencies[-1] * 1000), "all_answered_ms": round(all_answered * 1000),
            "teacher_sees_all_ms": round(seen.get("at", float("nan")) * 1000), "teacher_n": seen.get("n"),
            "teacher_counts": seen.get("counts")}


def run(k: int, state: Path) -> dict:
    from normlab.course import predictions

    db = state / "classroom.sqlite"
    extra = hubconfig.config_text(sys.executable, str(db), port=hubtool.free_port(), teachers=[TEACHER],
                                  service_env={"PYTHONPATH": str(ROOT)})
    rounds = []
    with ClassHub(state, extra) as hub:
        names = [f"learner{i:02d}" for i in range(k)]
        for name in names:
            hub.add_learner(name)
        tokens = {name: hub.token(name) for name in names}
        teacher_token = hub.token(TEACHER)
        for label, (lesson, pid) in (("first contact", ("01", "depth-std")), ("warm", ("01", "typical-gain"))):
            keys = "".join(predictions.entry(lesson, pid)["keys"])
            row = burst(hub, tokens, teacher_token, lesson, pid, keys)
            row["round"] = label
            rounds.append(row)
            print(f"[bench] {label:13s} {row}", flush=True)
        import sqlite3
        with sqlite3.connect(db) as con:
            stored = con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    return {"learners": k, "rounds": rounds, "events_in_store": stored, "expected": 2 * k}


def main(argv: list[str]) -> int:
    import argparse
    import os

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--learners", type=int, default=40)
    ap.add_argument("--out", default=str(ROOT / "build" / "bench_classroom.json"))
    args = ap.parse_args(argv)
    why = hubtool.available()
    if why:
        print(why)
        return 2
    with tempfile.TemporaryDirectory(prefix="normlab-classroom-bench-") as tmp:
        result = run(args.learners, Path(tmp))
    result.update(cpu_count=os.cpu_count(), when=time.strftime("%Y-%m-%d %H:%M"), load_avg=os.getloadavg())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"events stored {result['events_in_store']} of {result['expected']}; written {args.out}")
    return 0 if result["events_in_store"] == result["expected"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
