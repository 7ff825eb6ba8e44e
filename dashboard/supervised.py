"""The processes `harness up` supervises, as /ops/ shows them: read from the status record its
supervisor keeps in the data directory (harness_site.cli.supervisor writes it, replacing it in
one rename at each change). A deployment that runs its processes under systemd or a container
runtime has no record, and the section is not shown."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

# The record's name in HARNESS_DATA_DIR.
STATUS_FILE = "supervisor.json"


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def supervised_processes(*, data_dir: Path | None = None) -> list[dict[str, Any]] | None:
    """Each supervised process: name, pid, state (running, restarting, down: given up on,
    stopped), restarts, how its last run ended, since when it runs. None when no supervisor
    runs here (no record, or one a supervisor killed outright left behind)."""
    path = Path(data_dir or settings.DATA_DIR) / STATUS_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not _alive(record.get("supervisor_pid")):
        return None
    processes = []
    for entry in record.get("processes") or []:
        if not isinstance(entry, dict):
            continue
        since = entry.get("since")
        processes.append(
            {
                "name": str(entry.get("name", "")),
                "pid": entry.get("pid"),
                "state": str(entry.get("state", "")),
                "restarts": entry.get("restarts", 0),
                "last_exit": str(entry.get("last_exit", "")),
                "since": datetime.fromtimestamp(since, tz=UTC)
                if isinstance(since, int | float)
                else None,
            }
        )
    return processes
