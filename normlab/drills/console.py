"""Printing a report on any console (the drills import nothing else of normlab, so this is their own).

A Simplified-Chinese Windows console, or any output redirected there, encodes text as GBK (cp936),
which has the Chinese of a report but not ✓ or ✗: a plain print() raised UnicodeEncodeError and the
candidate never saw the report. ``say`` prints the whole text on any stream: ✓/✗ (and the few other
symbols the reports use) become readable ASCII where the stream cannot encode them, anything else
that cannot be encoded becomes "?". Nothing is ever lost to the console's encoding."""

from __future__ import annotations

import sys

# symbol -> what a console without it shows
FALLBACK = {"✓": "[OK]", "✗": "[X]", "—": "--", "–": "-", "…": "...", "≈": "~", "≤": "<=", "≥": ">=",
            "×": "x", "→": "->", "−": "-", "²": "^2", "³": "^3", "√": "sqrt", "‖": "||", "∑": "sum", "ε": "eps", "γ": "gamma", "β": "beta", "μ": "mu", "σ": "sigma", "·": "|",
            "⏱": "[time]", "⑪": "(11)", "\u0302": "^", "ĝ": "g^", "∂": "d", "ᵀ": "^T"}


def encodable(text: str, encoding: str) -> str:
    """`text` as a stream with this encoding can print it: symbols it lacks replaced by FALLBACK, the rest
    of what it lacks by '?'."""
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        pass
    out = []
    for ch in text:
        try:
            ch.encode(encoding)
            out.append(ch)
        except UnicodeEncodeError:
            out.append(FALLBACK.get(ch, "?"))
        except LookupError:
            return text.encode("ascii", errors="replace").decode("ascii")
    return "".join(out)


def say(text: object = "", stream=None) -> None:
    """print(text) that cannot fail on the stream's encoding."""
    stream = stream or sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    print(encodable(str(text), encoding), file=stream, flush=True)


def never_crash() -> None:
    """The process's own stdout/stderr replace what they cannot encode (a submission's print of ✓ included)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass
