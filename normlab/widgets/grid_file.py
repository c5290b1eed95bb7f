"""Precomputed grids: shipped with the package, and packed for a live widget's front-end (issue 36).

A grid maps ``web_host.grid_key(controls, order)`` to the data the front-end draws for those controls.

    write(path, header, grid)     gzipped JSON {**header, "grid": grid} (data/<name>_grid.json.gz)
    read(path, header)            the grid of that file when its header is ``header`` (else None)
    entry(grid, controls, order, fixed)   the grid's data for ``controls``, None outside it
    pack(grid)                    the ``grid`` trait of a live widget: base64 of gzipped JSON {"grid": ...}
                                  (a grid read from a file: that file's bytes, as they are); with the
                                  ``grid_meta`` trait {"order", "fixed"} the front-end (common.js
                                  nlUnpackGrid) answers a control change from it when the state is
                                  there, without the kernel. ``fixed``: controls outside the key the
                                  grid assumes (the explorer's seed 0): another value goes to the kernel.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["write", "read", "entry", "pack"]


def _json(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def write(path: Path, header: Mapping, grid: Mapping) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(_json({**header, "grid": grid}), compresslevel=9, mtime=0))


def read(path: Path, header: Mapping) -> dict | None:
    if not path.exists():
        return None
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw).decode())
    if not all(doc.get(k) == v for k, v in header.items()):
        return None
    _remember(doc["grid"], base64.b64encode(raw).decode())
    return doc["grid"]


def entry(grid: Mapping, controls: Mapping, order: Sequence[str], fixed: Mapping | None = None) -> Mapping | None:
    """As the front-end looks it up: the key "|".join(str(controls[n]) for n in order), and every
    ``fixed`` control at its value (absent counts as that value)."""
    if not grid or any(str(controls.get(n, v)) != str(v) for n, v in (fixed or {}).items()):
        return None
    if any(n not in controls for n in order):
        return None
    return grid.get("|".join(str(controls[n]) for n in order))


_packed: dict[int, tuple[object, str]] = {}   # id(grid) -> (grid, packed): the same grid object is packed once


def _remember(grid: Mapping, packed: str) -> str:
    if len(_packed) >= 4:                        # a few grids at most (each instance of GradFlow has its own)
        _packed.pop(next(iter(_packed)))
    _packed[id(grid)] = (grid, packed)
    return packed


def pack(grid: Mapping) -> str:
    """The grid as the ``grid`` trait carries it (about 2 MB of JSON -> about 0.3 MB)."""
    if id(grid) in _packed and _packed[id(grid)][0] is grid:
        return _packed[id(grid)][1]
    return _remember(grid, base64.b64encode(gzip.compress(_json({"grid": grid}), compresslevel=1, mtime=0)).decode())
