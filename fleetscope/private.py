"""Files fleetscope keeps are private to its user: 0600 files in 0700 folders, whatever the umask.

Why: the telemetry DuckDB file, its WAL, `catalog.sqlite` (token hashes, jobs, users), Parquet
segments, traces and the agent's spool were 0644 in 0755 folders under the usual umask 022, so
any local user could read job data and token hashes (issue 28). Files are created by several
libraries (DuckDB, SQLite, Arrow) that take their mode from the umask, so a server or agent
process sets `PRIVATE_UMASK` when it starts (`restrict_umask`), makes its folders with
`private_dir`, and tightens what an earlier version left readable (`tighten`).

Must never: follow a symbolic link when changing modes, widen a mode, or stop a process
because a mode cannot be changed (a warning says so).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["PRIVATE_UMASK", "private_dir", "restrict_umask", "tighten"]

PRIVATE_UMASK = 0o077


def restrict_umask() -> int:
    """Set the process umask to 077 (new files 0600, folders 0700); returns the previous one."""
    return os.umask(PRIVATE_UMASK)


def private_dir(path: Path) -> Path:
    """`path` (and missing parents) as a folder of mode 0700; an existing one is tightened."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    _chmod(path, 0o700)
    return path


def tighten(path: Path) -> None:
    """Remove group and other permissions from `path` and, for a folder, everything below it."""
    if not path.exists() or path.is_symlink():
        return
    _chmod_private(path)
    if path.is_dir():
        for folder, dirs, files in os.walk(path):
            for name in dirs + files:
                _chmod_private(Path(folder) / name)


def _chmod_private(path: Path) -> None:
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        return
    if stat.S_IMODE(mode) & 0o077:
        _chmod(path, stat.S_IMODE(mode) & 0o700)


def _chmod(path: Path, mode: int) -> None:
    """chmod, or a warning when the path is not ours to change (a volume another user owns):
    starting with the mode it has beats not starting."""
    try:
        os.chmod(path, mode)
    except PermissionError as exc:
        log.warning("cannot make %s private (mode %o): %s", path, mode, exc)
