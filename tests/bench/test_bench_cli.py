"""`python -m bench` answers a database it cannot reach with a one-line error, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlunsplit

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_database_is_a_clear_error(tmp_path):
    db = settings.DATABASES["default"]
    url = urlunsplit(
        ("postgres", f"{db['USER']}@{db['HOST']}:{db['PORT']}", "/harness_no_such_db", "", "")
    )
    env = {**os.environ, "DATABASE_URL": url, "HARNESS_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "list"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "cannot connect" in done.stderr and "harness_no_such_db" in done.stderr
