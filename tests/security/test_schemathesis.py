"""Schemathesis against the live OpenAPI schema, as an operator, on the real stack (a live
server, real rqworkers, PostgreSQL, Redis): any 5xx or response that violates the schema fails.
Data is generated positive and negative (`--mode all`, NUL characters included), and every
request with a body is sent again as text/plain, urlencoded, multipart and with no
Content-Type (the check in schemathesis_hooks.py), since the API parses each as JSON.

The operations are split into SHARDS test items (every operation in exactly one per phase,
each checked against schemathesis's report; creating a task and saving a template, the slowest
by far, each alone in three: by phase group and generation mode), balanced by each operation's
measured cost, so that pytest-xdist runs them on every process instead of one process spending
ten minutes on all of them, and no shard holds the others up. Sized to a few minutes on two
cores; `SCHEMATHESIS_MAX_EXAMPLES` raises the effort for a deeper run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests

from harness_site.api import api
from tasks.services import api_token_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
METHODS = ("get", "put", "post", "patch", "delete")
ALL_PHASES = "examples,coverage,fuzzing"


def operations() -> dict[str, list[str]]:
    """{path: ["GET /api/v1/...", ...]} of the schema the server serves."""
    return {
        path: [f"{method.upper()} {path}" for method in item if method in METHODS]
        for path, item in sorted(api.get_openapi_schema()["paths"].items())
    }


# Creating a task and saving a template (both a TaskSpec's large, nested body) took 45 % and
# 25 % of the whole run, most of it the coverage phase: the cases of each are split over three
# shards by phase and generation mode, together the cases of one `--mode all` run of every
# phase (a template in one shard took 300 s of a loaded machine, twice the next longest).
BY_PHASE_AND_MODE = (
    ("examples,coverage", "positive"),
    ("examples,coverage", "negative"),
    ("fuzzing", "all"),
)
SPLIT = {
    "POST /api/v1/tasks": BY_PHASE_AND_MODE,
    "POST /api/v1/templates": BY_PHASE_AND_MODE,
}
# Seconds an operation took (all three phases, a loaded two-core machine), for the operations
# above ten; any other counts as DEFAULT_COST_S. Only the balance of the shards depends on them.
COST_S = {
    "POST /api/v1/reviews/bulk-decision": 72,
    "POST /api/v1/tasks/{task_id}/fork": 53,
    "POST /api/v1/reviews/{review_id}/decision": 43,
    "POST /api/v1/cases/{case_id}/replay": 32,
    "GET /api/v1/cases": 31,
    "GET /api/v1/tasks": 28,
    "POST /api/v1/reviews/{review_id}/claim": 27,
    "GET /api/v1/cases/{case_id}": 22,
    "POST /api/v1/reviews/{review_id}/assign": 20,
    "POST /api/v1/ops/jobs/{queue_name}/{job_id}/requeue": 17,
    "GET /api/v1/reviews": 12,
}
DEFAULT_COST_S = 5
# Shards for the operations not split (besides one per split phase).
REST_SHARDS = 4


def shards() -> list[tuple[list[str], str, str]]:
    """[(operation labels, phases, mode), ...]: each part of a split operation alone, then the
    other operations dealt into REST_SHARDS shards, the costliest first to the cheapest shard
    so far; every operation's every phase and mode in exactly one shard."""
    split = [([label], *part) for label, parts in SPLIT.items() for part in parts]
    labels = [label for path in operations().values() for label in path if label not in SPLIT]
    rest: list[list[str]] = [[] for _ in range(REST_SHARDS)]
    load = [0] * REST_SHARDS
    for label in sorted(labels, key=lambda label: -COST_S.get(label, DEFAULT_COST_S)):
        cheapest = load.index(min(load))
        rest[cheapest].append(label)
        load[cheapest] += COST_S.get(label, DEFAULT_COST_S)
    return [*split, *((sorted(labels), ALL_PHASES, "all") for labels in rest)]


SHARDS = shards()


@pytest.mark.parametrize(
    ("labels", "phases", "mode"),
    SHARDS,
    ids=[f"{i + 1}-of-{len(SHARDS)}" for i in range(len(SHARDS))],
)
def test_no_operation_answers_a_server_error_or_breaks_its_schema(
    labels, phases, mode, live_server, workers, operator, tmp_path
):
    token = api_token_create(user=operator)
    report = tmp_path / "report"
    # The schema as the server serves it, read here without schemathesis's ten-second limit on
    # loading it (building it took longer than that on a loaded machine).
    schema = tmp_path / "openapi.json"
    served = requests.get(
        f"{live_server.url}/api/v1/openapi.json",
        headers={"Authorization": f"Bearer {token}"},
        timeout=120,
    )
    assert served.status_code == 200, served.text[:2000]
    schema.write_bytes(served.content)
    command = [
        str(SCHEMATHESIS),
        "run",
        str(schema),
        "--url",
        live_server.url,
        "--include-name-regex",
        "^(?:" + "|".join(re.escape(label) for label in labels) + ")$",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        "not_a_server_error,response_schema_conformance,no_server_error_in_any_content_type",
        "--mode",
        mode,
        "--generation-allow-x00",
        "true",
        "--phases",
        phases,
        "--max-examples",
        os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "10"),
        "--seed",
        os.environ.get("SCHEMATHESIS_SEED", "12"),
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--generation-database",
        "none",
        "--no-color",
        "--report",
        "junit",
        "--report-dir",
        str(report),
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env, check=False
    )
    assert result.returncode == 0, result.stdout[-12_000:] + result.stderr[-2000:]
    # Every operation of the shard was exercised (a filter that matched less fails here).
    tested = {
        case.get("name") for xml in report.glob("*.xml") for case in ET.parse(xml).iter("testcase")
    }
    assert set(labels) <= tested, sorted(set(labels) - tested)
