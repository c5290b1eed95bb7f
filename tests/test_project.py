"""Project wiring: environment.yml agrees with pyproject.toml, notebooks are well-formed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower().replace("_", "-")


def version_tuple(v: str) -> tuple[int, ...]:
    """'3.11' -> (3, 11): versions compare as numbers ("3.9" < "3.11"), never as strings."""
    return tuple(int(p) for p in re.findall(r"\d+", v))


def requires_python(project: dict) -> str:
    return project["requires-python"].removeprefix(">=")


def test_versions_compare_as_numbers():
    assert version_tuple("3.9") < version_tuple("3.11") < version_tuple("3.13.0")
    assert not version_tuple("3.9") >= version_tuple("3.11")   # as strings, "3.9" >= "3.11"


COURSE_ONLY_EXCLUDES = ("triton", "playwright", "jupyter-book", "pytest", "nbval")   # ~1 GB, a browser, the book


def _env(name: str) -> tuple[dict, list[str]]:
    env = yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, f"{name} needs exactly one pip: section"
    return env, pip_sections[0]


def _name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    """environment.yml (conda learners) = the course: pyproject's dependencies exactly, and `-e .` without extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    env, pip = _env("environment.yml")
    listed = {_norm(r) for r in pip if not r.startswith("-e")}
    wanted = {_norm(r) for r in project["dependencies"]}
    assert listed == wanted, f"only in environment.yml: {listed - wanted}; only in pyproject: {wanted - listed}"
    assert [r for r in pip if r.startswith("-e")] == ["-e ."], "the course package itself, without extras"
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python and version_tuple(python[0].split("=")[-1]) >= version_tuple(requires_python(project))
    assert "torch>=2.7.1,<2.15" in project["dependencies"]   # the range tested under nbval (README)


def would_install(env: dict, project: dict) -> set[str]:
    """The distributions an environment file names, by our own lists: its conda entries, its pip entries,
    and through `-e .[extras]` pyproject's dependencies and those extras (what pip resolves beyond that,
    third-party packages' own dependencies, is not ours)."""
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    names = [d for d in env["dependencies"] if isinstance(d, str)] + [r for r in pip if not r.startswith("-e")]
    for r in pip:
        if r.startswith("-e"):
            names += project["dependencies"]
            extras = re.search(r"\[(.*)\]", r)
            for extra in extras.group(1).split(",") if extras else []:
                names += project["optional-dependencies"][extra.strip()]
    return {_name(n) for n in names}


def test_environment_yml_installs_no_test_or_book_machinery():
    """`conda env create -f environment.yml` gives a learner the course: no Triton (~1 GB), Playwright
    (a browser driver), Jupyter Book or test runner. (torch's own CUDA wheel on Linux depends on
    Triton; the CPU wheel, see the file's comment, does not.)"""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    env, _ = _env("environment.yml")
    assert not would_install(env, project) & set(COURSE_ONLY_EXCLUDES),         sorted(would_install(env, project) & set(COURSE_ONLY_EXCLUDES))
    # the check catches both ways back: the extras listed again, or installed through -e .[...]
    listed = {"dependencies": ["python=3.11", {"pip": project["dependencies"] + project["optional-dependencies"]["fused"]
                                                      + ["-e ."]}]}
    through_e = {"dependencies": ["python=3.11", {"pip": ["-e .[book]"]}]}
    assert "triton" in would_install(listed, project) and "playwright" in would_install(through_e, project)


def test_environment_dev_yml_is_the_course_plus_every_extra():
    """environment-dev.yml (maintainers) installs the package with every extra of pyproject.toml: what
    `python3 run.py test` installs; a new extra must be named there too."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    env, pip = _env("environment-dev.yml")
    editable = [r for r in pip if r.startswith("-e")]
    assert len(editable) == 1 and re.fullmatch(r"-e \.\[[a-z,]+\]", editable[0]), editable
    extras = set(editable[0][len("-e .["):-1].split(","))
    assert extras == set(project["optional-dependencies"]), extras
    assert not [r for r in pip if not r.startswith("-e")], "dependencies come from pyproject.toml through -e"
    learner_env, _ = _env("environment.yml")
    assert env["name"] != learner_env["name"]
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python == [d for d in learner_env["dependencies"] if isinstance(d, str) and d.startswith("python")]


LOCKS = {(3, 11): "requirements-tested.txt", (3, 12): "requirements-tested-py3.12.txt",
         (3, 13): "requirements-tested-py3.13.txt"}


@pytest.mark.parametrize("minor", sorted(LOCKS), ids=lambda v: f"py{v[0]}.{v[1]}")
def test_tested_versions_are_recorded_and_satisfy_pyproject(minor):
    text = (ROOT / LOCKS[minor]).read_text(encoding="utf-8")
    assert f"(Python {minor[0]}.{minor[1]}," in text.splitlines()[0], "header names the Python it was tested on"
    lock = dict(line.split("==") for line in text.splitlines() if "==" in line and not line.startswith("#"))
    lock = {k.lower().replace("_", "-"): v for k, v in lock.items()}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    torch_range = next(r for r in project["dependencies"] if r.startswith("torch"))   # "torch>=2.7.1,<2.15"
    low, high = (version_tuple(b) for b in re.findall(r"[<>]=?([\d.]+)", torch_range))
    assert low <= version_tuple(lock["torch"]) < high, "run.py's exact torch lies in the declared range"
    for name in ("numpy", "matplotlib", "ipywidgets", "jupyterlab", "jupytext", "nbval", "pytest", "mplfonts"):
        assert name in lock, name


def test_tested_pythons_cover_requires_python():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert min(LOCKS) == version_tuple(requires_python(project))
    from normlab.env import TESTED_PYTHONS
    assert tuple(sorted(LOCKS)) == TESTED_PYTHONS   # 00's check warns outside this matrix


def notebook_sources():
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))


def test_every_notebook_is_a_jupytext_myst_notebook_that_checks_itself():
    srcs = notebook_sources()
    assert srcs and srcs[0].name.startswith("00_")
    for src in srcs:
        nb = jupytext.read(src)
        assert nb.metadata["jupytext"]["text_representation"]["format_name"] == "myst", src.name
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "normlab.setup(" in code, f"{src.name}: first code should call normlab.setup()"
        assert re.search(r"\bexpect\(", code), f"{src.name}: no expect(), nbval would check nothing"
        bare = [line.strip() for line in code.splitlines() if re.match(r"\s*assert\b", line)]
        assert not bare, f"{src.name}: bare assert (use normlab.record.expect, which the sweep records): {bare[:3]}"
        assert "../shared" not in src.read_text(encoding="utf-8"), f"{src.name} reads ../shared, which learners do not have"
