"""File names made from names people and schedulers choose (teams, users, jobs, hosts).

Why: a team called `ml/vision` made `report weekly --all` write `team-ml/vision.html`, a folder
that does not exist, and the run aborted (issue 12); `../x` would write outside the reports folder.
`file_name_part` keeps letters, digits, '.', '_' and '-', replaces the rest with '_', and when it
had to change anything appends a short hash of the original, so `ml/vision` and `ml_vision`
never share a file. A name that is already safe is returned as it is (existing files keep their
names). Must never return an empty string, '.', '..' or anything with a path separator.
"""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_CHARS = 80


def file_name_part(name: str) -> str:
    cleaned = _UNSAFE.sub("_", name).strip(".")[:MAX_CHARS]
    if cleaned == name and cleaned:
        return cleaned
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned or 'name'}-{digest}"
