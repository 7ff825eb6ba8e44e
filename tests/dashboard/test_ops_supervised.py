"""/ops/ shows the processes `harness up` supervises, from the status record its supervisor
keeps in the data directory: a process given up on is down; no live supervisor, no section."""

from __future__ import annotations

import json
import subprocess

import pytest

from dashboard.supervised import STATUS_FILE
from harness_site.cli.restarts import status_write

pytestmark = pytest.mark.django_db

PROCESSES = [
    {"name": "web", "pid": 11, "state": "running", "restarts": 0, "last_exit": "", "since": 1.0},
    {
        "name": "worker-2",
        "pid": 12,
        "state": "down",
        "restarts": 5,
        "last_exit": "pid 12 exit code 3",
        "since": 2.0,
    },
]


def test_ops_shows_a_process_given_up_on_as_down(as_user, viewer, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    status_write(tmp_path / STATUS_FILE, processes=PROCESSES)
    page = as_user(viewer).get("/ops/").content.decode()
    assert 'data-testid="supervised"' in page
    assert '<td data-testid="supervised-state-worker-2"><span class="pill error">down</span>' in (
        page
    )
    assert 'data-testid="supervised-exit-worker-2">pid 12 exit code 3<' in page
    assert 'data-testid="supervised-pid-web">11<' in page


def test_a_record_left_by_a_dead_supervisor_is_not_shown(as_user, viewer, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    record = {"supervisor_pid": gone.pid, "updated_at": 0, "processes": PROCESSES}
    (tmp_path / STATUS_FILE).write_text(json.dumps(record))
    response = as_user(viewer).get("/ops/")
    assert response.context["supervised"] is None
    assert 'data-testid="supervised"' not in response.content.decode()
