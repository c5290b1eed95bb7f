"""Printing on any console: what every command-line entry point calls first (core; imports no torch).

A Simplified-Chinese Windows console, or output redirected there, encodes text as GBK (cp936): it has
the Chinese of a report but not ✓, ✗, −, ², ∂ or ⚠, and a plain print() of one raised
UnicodeEncodeError, losing the report. ``console_safe()`` puts an error handler on stdout/stderr that
prints such a symbol as readable ASCII (✓ -> [OK], ✗ -> [X]) and anything else the console lacks as
'?'. Used by python -m normlab.bench, the widgets' --write-grid and tools/*.py. (The drills, which
import nothing else of normlab, have their own console.say.)"""

from __future__ import annotations

import codecs
import sys

# what a console whose encoding lacks a symbol shows instead
CONSOLE_FALLBACK = {"✓": "[OK]", "✗": "[X]", "⚠": "(!)", "−": "-", "²": "^2", "³": "^3", "∂": "d", "√": "sqrt",
                    "‖": "||", "∑": "sum", "≤": "<=", "≥": ">=", "≈": "~", "→": "->", "×": "x", "…": "...",
                    "—": "--", "–": "-", "ε": "eps", "·": "|"}
CONSOLE_ERRORS = "normlab-fallback"   # the codecs error handler console_safe() puts on stdout/stderr


def _console_fallback(err: UnicodeError) -> tuple[str, int]:
    """codecs error handler: each character the stream cannot encode -> CONSOLE_FALLBACK's ASCII, else '?'."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(CONSOLE_FALLBACK.get(ch, "?") for ch in err.object[err.start:err.end]), err.end


codecs.register_error(CONSOLE_ERRORS, _console_fallback)


def console_safe(*streams) -> None:
    """What every command-line entry point (python -m normlab.bench, the widgets' --write-grid, tools/*.py)
    calls first: its stdout/stderr (or ``streams``) print anything, on any console. A character the
    console's encoding lacks becomes readable ASCII (✓ -> [OK], ✗ -> [X]) or '?': never a
    UnicodeEncodeError that loses the report. A stream already in UTF-8 is unchanged."""
    for stream in streams or (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors=CONSOLE_ERRORS)
        except (AttributeError, ValueError):   # not a TextIOWrapper (a notebook's stream, a StringIO)
            pass
