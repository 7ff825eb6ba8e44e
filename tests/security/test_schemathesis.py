"""Schemathesis against the live OpenAPI schema, as an operator, on the real stack (a live
server, real rqworkers, PostgreSQL, Redis): any 5xx or response that violates the schema fails.
Data is generated positive and negative (`--mode all`, NUL characters included), and every
request with a body is sent again as text/plain, urlencoded, multipart and with no
Content-Type (the check in schemathesis_hooks.py), since the API parses each as JSON.

The operations are split into SHARDS test items, each one or two schemathesis runs (every
operation's every phase and mode in exactly one run, each run checked against schemathesis's
report): creating a task and saving a template (a TaskSpec's large, nested body), the slowest
by far, split by generation mode, and the other operations in two shards balanced by each
operation's measured cost, so that pytest-xdist runs them on every process and no shard holds
the others up. Nothing is sampled away: every run keeps all three phases' cases for its mode,
the coverage phase's deterministic cases in full (it has no example limit), and fuzzing's
`--max-examples` per operation; `SCHEMATHESIS_MAX_EXAMPLES` raises the effort for a deeper
run. Five shards, where ten paid each shard's fixed cost (two rqworkers, schemathesis's start
and schema load, the database flush) twice as often: see SPEC_SHARDS and REST_SHARDS."""

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


# Creating a task and saving a template (both a TaskSpec's large, nested body) are most of the
# run, nearly all of it the coverage phase's deterministic cases (1681 negative and 642
# positive ones for a task, each body sent twice, with the re-send of the hooks): each runs its
# negative cases alone, and both their positive ones together, in schemathesis runs of their
# own (RUNS_OF_A_SPEC); their fuzzing is seconds. Together, the cases of one `--mode all` run of
# every phase.
SPEC_BODIES = ("POST /api/v1/tasks", "POST /api/v1/templates")
SPEC_SHARDS = (
    [([SPEC_BODIES[0]], "examples,coverage", "negative"), ([SPEC_BODIES[0]], "fuzzing", "all")],
    [([SPEC_BODIES[1]], "examples,coverage", "negative"), ([SPEC_BODIES[1]], "fuzzing", "all")],
    [(list(SPEC_BODIES), "examples,coverage", "positive")],
)
# Seconds an operation took (all three phases, a loaded two-core machine, 3 xdist processes),
# for the operations of three or more; any other counts as DEFAULT_COST_S. Only the balance of
# the shards depends on them. The spec shards above took 117, 97 and 97 s on that run.
COST_S = {
    "POST /api/v1/reviews/{review_id}/decision": 24,
    "POST /api/v1/reviews/bulk-decision": 14,
    "POST /api/v1/tasks/{task_id}/fork": 11,
    "GET /api/v1/reviews": 7,
    "POST /api/v1/tasks/{task_id}/save-case": 6,
    "POST /api/v1/tasks/{task_id}/rollback": 5,
    "POST /api/v1/tasks/{task_id}/group-rollback": 5,
    "POST /api/v1/tasks/{task_id}/compensation": 5,
    "POST /api/v1/reviews/{review_id}/assign": 5,
    "POST /api/v1/cases/{case_id}/replay": 4,
    "POST /api/v1/tasks/{task_id}/adopt": 4,
    "POST /api/v1/standing-rules/{rule_id}/pause": 4,
    "POST /api/v1/reviews/{review_id}/claim": 4,
    "POST /api/v1/standing-rules/{rule_id}/resume": 4,
    "POST /api/v1/reviews/{review_id}/comments": 4,
    "POST /api/v1/standing-rules/{rule_id}/revoke": 3,
    "POST /api/v1/tasks/{task_id}/priority": 3,
}
DEFAULT_COST_S = 1.4
# Shards for the other operations (about 85 s each on that run, as long as the spec shards):
# fewer shards, fewer of a shard's fixed seconds (its rqworkers, schemathesis's start and
# schema load, the database flush) paid again.
REST_SHARDS = 2

Run = tuple[list[str], str, str]  # (operation labels, phases, generation mode)


def shards() -> list[list[Run]]:
    """[[(operation labels, phases, mode), ...] a shard, ...]: the spec bodies' SPEC_SHARDS, then
    the other operations dealt into REST_SHARDS shards, the costliest first to the cheapest
    shard so far; every operation's every phase and mode in exactly one run."""
    labels = [label for path in operations().values() for label in path if label not in SPEC_BODIES]
    rest: list[list[str]] = [[] for _ in range(REST_SHARDS)]
    load = [0.0] * REST_SHARDS
    for label in sorted(labels, key=lambda label: -COST_S.get(label, DEFAULT_COST_S)):
        cheapest = load.index(min(load))
        rest[cheapest].append(label)
        load[cheapest] += COST_S.get(label, DEFAULT_COST_S)
    return [*SPEC_SHARDS, *([(sorted(labels), ALL_PHASES, "all")] for labels in rest)]


SHARDS = shards()


def schemathesis_run(run: Run, *, url: str, token: str, schema: Path, work: Path) -> None:
    """One schemathesis run of `run`'s operations, phases and mode against the server at `url`:
    no failed check, and every operation of the run exercised (a filter that matched less
    fails here)."""
    labels, phases, mode = run
    report = work / "report"
    command = [
        str(SCHEMATHESIS),
        "run",
        str(schema),
        "--url",
        url,
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
        command, capture_output=True, text=True, timeout=900, cwd=work, env=env, check=False
    )
    assert result.returncode == 0, result.stdout[-12_000:] + result.stderr[-2000:]
    tested = {
        case.get("name") for xml in report.glob("*.xml") for case in ET.parse(xml).iter("testcase")
    }
    assert set(labels) <= tested, sorted(set(labels) - tested)


@pytest.mark.parametrize(
    "runs", SHARDS, ids=[f"{i + 1}-of-{len(SHARDS)}" for i in range(len(SHARDS))]
)
def test_no_operation_answers_a_server_error_or_breaks_its_schema(
    runs, live_server, workers, operator, tmp_path
):
    token = api_token_create(user=operator)
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
    for index, run in enumerate(runs):
        work = tmp_path / f"run-{index + 1}"
        work.mkdir()
        schemathesis_run(run, url=live_server.url, token=token, schema=schema, work=work)
