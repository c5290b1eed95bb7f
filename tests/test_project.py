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


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [r for reqs in project["optional-dependencies"].values() for r in reqs]
    wanted = {_norm(r) for r in project["dependencies"] + extras}
    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip: section"
    listed = {_norm(r) for r in pip_sections[0] if not r.startswith("-e")}
    assert listed == wanted, f"only in environment.yml: {listed - wanted}; only in pyproject: {wanted - listed}"
    assert "-e ." in pip_sections[0]
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python and version_tuple(python[0].split("=")[-1]) >= version_tuple(requires_python(project))
    assert "torch==2.13.0" in project["dependencies"]


LOCKS = {(3, 11): "requirements-tested.txt", (3, 12): "requirements-tested-py3.12.txt",
         (3, 13): "requirements-tested-py3.13.txt"}


@pytest.mark.parametrize("minor", sorted(LOCKS), ids=lambda v: f"py{v[0]}.{v[1]}")
def test_tested_versions_are_recorded_and_satisfy_pyproject(minor):
    text = (ROOT / LOCKS[minor]).read_text(encoding="utf-8")
    assert f"(Python {minor[0]}.{minor[1]}," in text.splitlines()[0], "header names the Python it was tested on"
    lock = dict(line.split("==") for line in text.splitlines() if "==" in line and not line.startswith("#"))
    lock = {k.lower().replace("_", "-"): v for k, v in lock.items()}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    torch_pin = next(r.split("==")[1] for r in project["dependencies"] if r.startswith("torch=="))
    assert lock["torch"] == torch_pin
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
