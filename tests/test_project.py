"""Project wiring: environment.yml agrees with pyproject.toml, notebooks are well-formed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import jupytext
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for reqs in project["optional-dependencies"].values() for r in reqs]
    wanted = {_norm(r) for r in project["dependencies"] + extras}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip: section"
    listed = {_norm(r) for r in pip_sections[0] if not r.startswith("-e")}
    assert listed == wanted, f"only in environment.yml: {listed - wanted}; only in pyproject: {wanted - listed}"
    assert "-e ." in pip_sections[0]
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python and python[0].split("=")[-1] >= "3.11"
    assert "torch==2.13.0" in project["dependencies"]


def test_tested_versions_are_recorded_and_satisfy_pyproject():
    lock = dict(line.split("==") for line in (ROOT / "requirements-tested.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    lock = {k.lower().replace("_", "-"): v for k, v in lock.items()}
    assert lock["torch"].startswith("2.13.0")
    for name in ("numpy", "matplotlib", "ipywidgets", "jupyterlab", "jupytext", "nbval", "pytest", "mplfonts"):
        assert name in lock, name


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
        assert re.search(r"^\s*assert ", code, re.M), f"{src.name}: no assert, nbval would check nothing"
        assert "../shared" not in src.read_text(), f"{src.name} reads ../shared, which learners do not have"
