"""Private by default: the course's own folders and files in a learner's home (the workspace,
~/.normlab and its JSON files) are their owner's only -- 0700 folders, 0600 files -- whatever the
umask and whatever the mode of the home around them (issue 38: on a class server with plain
``useradd -m`` accounts the homes are 0755, and learners read each other's answers).

Windows has no such modes (os.chmod only sets the read-only flag there); a Windows home is private
by its ACL already.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DIR_MODE, FILE_MODE = 0o700, 0o600


def private_dir(folder: Path) -> Path:
    """`folder` made (with its missing parents) and set to 0700; an existing one is tightened too."""
    folder = Path(folder)
    folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if stat.S_IMODE(folder.stat().st_mode) != DIR_MODE:
        os.chmod(folder, DIR_MODE)
    return folder


def write_private(path: Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` whole, through a temporary file created 0600 and renamed over it:
    no other account ever sees a byte of it, not even mid-write. A missing folder is made 0700; an
    existing one is left as it is (it may be a folder the learner named, e.g. through an environment
    variable): the course's own folders are tightened by private_dir."""
    path = Path(path)
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, FILE_MODE)          # an earlier tmp of the same name may have had another mode
    os.replace(tmp, path)
    return path


def make_private(path: Path) -> None:
    """A file the course wrote through another library (jupytext): owner-only, read-write."""
    os.chmod(path, FILE_MODE)
