"""What every demo of the companion shares: the result type, the seeded random streams, and the
registry that ties an erratum id to its demo and to the flawed code the demo runs.

    @corrects("A3", layer_norm_eps_outside)      # the flawed function, printed by companion.code("A3")
    def demo_a3() -> Demo: ...

A demo draws every random tensor from ``gen(stream)``: stream numbers are fixed per demo, and
``seeded(seed)`` shifts all of them by the demo's seed while leaving the global RNG as it was.
"""

from __future__ import annotations

import functools
import tomllib
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources

import torch
from torch import Tensor

from ..viz import Table

__all__ = ["Demo", "corrects", "DEMOS", "FLAWED", "gen", "offset", "seeded", "with_seed", "maxdiff", "quiet", "load_toml"]


@dataclass
class Demo:
    """A demo's measurement: a small table to display and the key numbers (``values``)."""
    title: str
    columns: list[str]
    rows: list[list[object]]
    values: dict[str, float]

    def table(self) -> Table:
        return Table(self.rows, self.columns, title=self.title)

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __repr__(self) -> str:
        return str(self.table())


DEMOS: dict[str, Callable[[], Demo]] = {}          # erratum id -> its demo
FLAWED: dict[str, tuple[Callable, ...]] = {}       # erratum id -> the flawed code that demo runs


def corrects(erratum_id: str, *flawed: Callable) -> Callable[[Callable[[], Demo]], Callable[[], Demo]]:
    """Register the decorated function as the demo of ``erratum_id``; ``flawed`` are the functions
    (or methods) holding the document's mistake, whose source companion.code() prints."""
    def register(demo: Callable[[], Demo]) -> Callable[[], Demo]:
        if erratum_id in DEMOS:
            raise ValueError(f"erratum {erratum_id} has two demos")
        DEMOS[erratum_id], FLAWED[erratum_id] = demo, flawed
        return demo
    return register


_SEED = [0]   # the seed of the demo running now; every stream below is shifted by it


def offset() -> int:
    """How far the current demo's seed shifts every random stream (0 for seed 0)."""
    return 1009 * _SEED[0]


def gen(stream: int = 0) -> torch.Generator:
    """A generator for one of a demo's random streams, shifted by the demo's seed."""
    return torch.Generator().manual_seed(stream + offset())


@contextmanager
def seeded(seed: int):
    """Run with every stream shifted by ``seed``; the global RNG is restored afterwards."""
    saved, _SEED[0] = _SEED[0], int(seed)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        _SEED[0] = saved


def with_seed(fn: Callable) -> Callable:
    """Give a measurement a ``seed`` keyword (its random streams shifted by it, as demo() does)."""
    @functools.wraps(fn)
    def wrapper(*args, seed: int = 0, **kwargs):
        with seeded(seed):
            return fn(*args, **kwargs)
    return wrapper


def maxdiff(a: Tensor, b: Tensor) -> float:
    """max |a - b|, computed in float64."""
    return (a.detach().double() - b.detach().double()).abs().max().item()


@contextmanager
def quiet():
    """Silence warnings inside a demo (e.g. F.rms_norm's mixed-dtype UserWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def load_toml(name: str) -> dict:
    """One of the companion's data files (normlab/companion/NAME), shipped inside the package."""
    return tomllib.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))
