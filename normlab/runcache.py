"""Training runs the test run has already made, replayed in the learner copy (issue 27 item 2).

Off unless ``NORMLAB_RUN_CACHE`` is set, and only the test run sets it (tools/nbval_book.py, for
nbval's kernels): a learner never meets it. The test run executes each lesson twice: the solution
copy, then the learner copy, which is the same notebook up to its exercises. In the solution copy's
kernel (``record:DIR``) each ``normlab.train.train`` call writes what it did to DIR; in the learner
copy's kernel (``replay:DIR``) the same call, at the same point of the same program with the same
inputs, puts that result back instead of training again. Every cell still runs, top to bottom.

Why a replay cannot behave differently from the training it replaces. A call is replayed only when
its key matches, and the key holds

* the source of every cell this kernel has run since ``setup()`` (IPython's pre_run_cell event) and
  the number of the call within the current cell: the same program, at the same point. A learner
  copy's exercise cells differ from the solution's, so no call at or after the first one of them
  (where a learner's own class could be trained) is ever replayed;
* the model (every module's class and plain attributes, every parameter and buffer, bit for bit),
  the data, the arguments and the global random states (torch, numpy, random) at the call.

What the call leaves behind is put back whole: the returned History, every parameter and buffer,
every parameter's .grad, the modules' train/eval mode, and the global random states after it (the
loop may draw from them, e.g. a noisy BatchNorm). A call whose effects reach further is never
recorded: one with ``after_backward`` (a callback of the lesson's), a model with hooks, or a
training that changed a module attribute other than tensors and the mode. tests/test_runcache.py
replays runs of every kind the lessons make and compares all of this bit for bit.

``result`` does the same for a measurement without a model of the lesson's: one that builds what it
measures from its inputs (06's ffn_grads: models from seeds) or in processes of its own (02's
SyncBatchNorm demo), and leaves behind only its result and the global random states.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

from .record import code_only

VARIABLE = "NORMLAB_RUN_CACHE"      # "record:DIR" (solution copy) or "replay:DIR" (learner copy)
LOG = "replays.log"                 # one line per replayed call: seconds saved, the call's desc
DEPTH = 4                           # how deep _value follows nested objects
WORTH = 100e6                       # bytes a second: a call is recorded when it took longer than its effects
                                    # take to save and load (05's one step on 1000 layers: 0.9 s for 200 MB, not)
_SKIP = {"_parameters", "_buffers", "_modules", "training", "_non_persistent_buffers_set",
         "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
         "_load_state_dict_post_hooks", "_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
         "_backward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs",
         "_forward_hooks_always_called", "_is_full_backward_hook"}
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")

_cells = hashlib.sha256()           # the program so far: every cell's source since track()
_current: list = [None, 0]          # the cell now running (None: unknown), calls made in it so far


def mode() -> tuple[str, Path] | None:
    """("record" | "replay", folder) from NORMLAB_RUN_CACHE, or None (the normal case)."""
    value = os.environ.get(VARIABLE, "")
    kind, _, folder = value.partition(":")
    return (kind, Path(folder)) if kind in ("record", "replay") and folder else None


def track() -> None:
    """Follow the cells this IPython kernel runs (called by normlab.setup(); nothing outside IPython
    or without NORMLAB_RUN_CACHE). Registered once."""
    if mode() is None or getattr(track, "done", False):
        return
    try:
        ip = get_ipython()  # noqa: F821  (IPython's builtin)
    except NameError:
        return

    ip.events.register("pre_run_cell", lambda info: cell(info.raw_cell))
    track.done = True


# A prompt's choice cell draws a widget and computes nothing; the learner copy awaits it, the solution copy does not.
_CHOICE_CELL = re.compile(r'from normlab\.widgets import predict\n(?:await )?predict\.ask\("\w+", "[\w.-]+"\)')


def cell(source: str) -> None:
    """A cell starts: the program so far grows by its code (record.code_only: comments do not run, so the
    learner copy's collapsed cells, which open with a comment line, are the solution copy's program), and its
    calls count from 0. A prompt's choice cell counts as an empty cell in both copies."""
    code = code_only(source)
    if _CHOICE_CELL.fullmatch(code):
        code = ""
    _cells.update(hashlib.sha256(code.encode("utf-8")).digest())
    _current[:] = [_cells.hexdigest(), 0]


# --- fingerprints ---------------------------------------------------------------------------------------

def _tensor(h, t) -> None:
    import torch

    t = t.detach().contiguous().cpu()
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())


def _value(h, v, depth: int = 0) -> None:
    """Plain values by repr, tensors bit for bit, containers element-wise, anything else by its type.
    Nested objects are followed DEPTH levels deep (a module may hold a reference back to its parent)."""
    import torch

    if isinstance(v, torch.Tensor):
        _tensor(h, v)
    elif isinstance(v, torch.Generator):            # a module's own random stream (e.g. NoisyShift)
        _tensor(h, v.get_state())
    elif v is None or isinstance(v, (bool, int, float, str)):
        h.update(repr(v).encode())
    elif depth >= DEPTH:
        h.update(f"<{type(v).__module__}.{type(v).__qualname__}>".encode())
    elif isinstance(v, (list, tuple)):
        h.update(f"{type(v).__name__}[{len(v)}]".encode())
        for x in v:
            _value(h, x, depth + 1)
    elif isinstance(v, dict):
        for k in sorted(v, key=repr):
            h.update(repr(k).encode())
            _value(h, v[k], depth + 1)
    elif isinstance(v, torch.nn.Module):          # a module held outside the model's tree (a plain list)
        h.update(type(v).__qualname__.encode() + _state(v).encode())
    elif hasattr(v, "__dict__") and not callable(v):
        h.update(type(v).__qualname__.encode())
        _value(h, dict(vars(v)), depth + 1)
    else:
        h.update(f"<{type(v).__module__}.{type(v).__qualname__}>".encode())


def _attributes(model, during: bool = False) -> str:
    """Every module's class and mode, and its attributes other than parameters, buffers, submodules and
    hooks. during=True: what a training may not change (the mode and the modules' own generators,
    which are put back, left out)."""
    import torch

    h = hashlib.sha256()
    for name, m in model.named_modules():
        h.update(f"{name}:{type(m).__module__}.{type(m).__qualname__}:{'' if during else m.training}".encode())
        _code(h, type(m))
        _value(h, {k: v for k, v in vars(m).items()
                   if k not in _SKIP and not (during and isinstance(v, torch.Generator))})
    return h.hexdigest()


def _code(h, cls) -> None:
    """The bytecode and constants of every method a class outside torch defines (its MRO included):
    two kernels' ``__main__.Net`` with different bodies differ here."""
    for c in cls.__mro__:
        if c.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        for name, f in sorted(vars(c).items()):
            code = getattr(getattr(f, "__func__", f), "__code__", None)
            if code is not None:
                h.update(name.encode())
                _bytecode(h, code)


def _bytecode(h, code) -> None:
    h.update(code.co_code + repr(code.co_names).encode())
    for x in code.co_consts:
        if hasattr(x, "co_code"):
            _bytecode(h, x)           # a nested function, comprehension or lambda
        else:
            h.update(repr(x).encode())


def _generators(model) -> dict:
    import torch

    return {f"{name}.{k}": v for name, m in model.named_modules() for k, v in vars(m).items()
            if isinstance(v, torch.Generator)}


def _tensors(model) -> dict:
    """Every parameter and buffer (non-persistent ones too, which state_dict() leaves out), by name."""
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def _state(model) -> str:
    h = hashlib.sha256()
    for name, t in _tensors(model).items():
        h.update(name.encode())
        _tensor(h, t)
    return h.hexdigest()


def _random_states() -> str:
    import numpy as np
    import torch

    h = hashlib.sha256()
    _tensor(h, torch.get_rng_state())
    h.update(repr(np.random.get_state()[1].tolist()).encode() + repr(np.random.get_state()[2:]).encode())
    h.update(repr(random.getstate()).encode())
    return h.hexdigest()


def _has_hooks(model) -> bool:
    import torch.nn.modules.module as mm

    glob = any(getattr(mm, f"_global{k}", None) for k in ("_forward_hooks", "_forward_pre_hooks",
                                                         "_backward_hooks", "_backward_pre_hooks"))
    return glob or any(getattr(m, k, None) for m in model.modules() for k in _HOOKS)


def key(model, inputs) -> str | None:
    """The call's key, or None when it cannot be keyed (the cell that is running is unknown). A call
    without a model (``result``) is keyed by the rest alone."""
    if _current[0] is None:
        return None
    import torch

    h = hashlib.sha256(f"{_current[0]}#{_current[1]}#{torch.get_num_threads()}".encode())
    for part in ((_attributes(model), _state(model)) if model is not None else ()) + (_random_states(),):
        h.update(part.encode())
    _value(h, inputs)
    return h.hexdigest()


# --- record and replay ------------------------------------------------------------------------------------

def _effects(model, history, seconds: float) -> dict:

    return {"history": history, "seconds": seconds,
            "state": {k: v.detach().clone() for k, v in _tensors(model).items()},
            "grads": {k: (None if p.grad is None else p.grad.detach().clone()) for k, p in model.named_parameters()},
            "training": {k: m.training for k, m in model.named_modules()},
            "generators": {k: g.get_state() for k, g in _generators(model).items()},
            "random": _random_now()}


def _random_now() -> tuple:
    import numpy as np
    import torch

    return torch.get_rng_state(), np.random.get_state(), random.getstate()


def _set_random(states: tuple) -> None:
    import numpy as np
    import torch

    torch_state, np_state, py_state = states
    torch.set_rng_state(torch_state)
    np.random.set_state(np_state)
    random.setstate(py_state)


def _replayed(folder: Path, seconds: float, desc: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOG, "a", encoding="utf-8") as log:
        log.write(f"{seconds:.3f}\t{desc}\n")


def _put_back(model, saved: dict):
    import torch

    tensors = _tensors(model)
    if set(tensors) != set(saved["state"]):
        raise RuntimeError("runcache: the replayed model's tensors differ from the recorded one's")
    with torch.no_grad():
        for k, t in tensors.items():
            t.copy_(saved["state"][k])
    for k, p in model.named_parameters():
        g = saved["grads"][k]
        p.grad = None if g is None else g.clone()
    for k, m in model.named_modules():
        m.training = saved["training"][k]
    for k, g in _generators(model).items():
        g.set_state(saved["generators"][k])
    _set_random(saved["random"])
    return saved["history"]


def _cached(how: tuple[str, Path], fn: Callable[[], object], model, inputs, desc: str,
            put_back: Callable[[dict], object], effects: Callable[[object, float], dict | None]):
    """What ``run`` and ``result`` share: key the call; replaying, put back a recorded call's effects
    (``put_back(saved)``); recording, call ``fn`` and save ``effects(its value, seconds)`` (None: not
    worth saving, or not safe to)."""
    kind, folder = how
    k = key(model, inputs)
    _current[1] += 1
    if k is None:
        return fn()
    import torch

    path = folder / f"{k}.pt"
    if kind == "replay" and path.exists():
        saved = torch.load(path, weights_only=False)
        out = put_back(saved)
        _replayed(folder, saved["seconds"], desc)
        return out
    if kind != "record":
        return fn()
    t0 = time.perf_counter()
    out = fn()
    saved = effects(out, time.perf_counter() - t0)
    if saved is not None:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{k}.tmp{os.getpid()}"
        torch.save(saved, tmp)
        os.replace(tmp, path)
    return out


def run(fn: Callable[[], object], model, inputs, *, unsafe: bool = False, desc: str = ""):
    """``fn()`` (a training of ``model``), recorded or replayed as NORMLAB_RUN_CACHE says; simply
    ``fn()`` when it is unset, when ``unsafe`` (effects beyond the model), or the model has hooks."""
    how = mode()
    if how is None or unsafe or _has_hooks(model):
        return fn()
    before = _attributes(model, during=True) if how[0] == "record" else None

    def effects(history, seconds: float) -> dict | None:
        if _attributes(model, during=True) != before:     # the training changed something we cannot put back
            return None
        size = sum(t.numel() * t.element_size() for t in _tensors(model).values()) * 2      # tensors and grads
        if seconds < size / WORTH:                # a quick call on a big model: loading it back would cost more
            return None
        return _effects(model, history, seconds)

    return _cached(how, fn, model, inputs, desc, lambda saved: _put_back(model, saved), effects)


def result(fn: Callable[[], object], inputs, *, desc: str = ""):
    """``fn()`` for a measurement that builds what it measures from ``inputs`` alone (its own models,
    from seeds; its own processes) and leaves nothing behind but its result and the global random
    states: recorded or replayed as NORMLAB_RUN_CACHE says, with the key of ``run`` less the model (the
    program so far, the call's number in its cell, the inputs, the global random states). A replay
    returns the recorded result and puts the random states back as the call left them.
    (placement.ffn_grads, sync_bn.sync_batchnorm_demo.)"""
    how = mode()
    if how is None:
        return fn()

    def put_back(saved: dict):
        _set_random(saved["random"])
        return saved["result"]

    return _cached(how, fn, None, inputs, desc, put_back,
                   lambda out, seconds: {"result": out, "seconds": seconds, "random": _random_now()})
