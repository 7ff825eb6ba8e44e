"""Schemathesis against the live OpenAPI schema, as an operator, on the real stack (a live
server, real rqworkers, PostgreSQL, Redis): any 5xx or response that violates the schema fails.
Data is generated positive and negative (`--mode all`, NUL characters included), and every
request with a body is sent again as text/plain, urlencoded, multipart and with no
Content-Type (the check in schemathesis_hooks.py), since the API parses each as JSON.

The operations are split into SHARDS test items by path (every path in exactly one, each
checked against schemathesis's report; creating a task, the slowest by far, alone), so that
pytest-xdist runs them on every process instead of one process spending ten minutes on all of
them. Sized to a few minutes on two cores; `SCHEMATHESIS_MAX_EXAMPLES` raises the effort for a
deeper run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness_site.api import api
from tasks.services import api_token_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
SHARDS = 7
METHODS = ("get", "put", "post", "patch", "delete")


def operations() -> dict[str, list[str]]:
    """{path: ["GET /api/v1/...", ...]} of the schema the server serves."""
    return {
        path: [f"{method.upper()} {path}" for method in item if method in METHODS]
        for path, item in sorted(api.get_openapi_schema()["paths"].items())
    }


# Paths that take minutes alone (creating a task, saving a template: the TaskSpec's large,
# nested body), each in a shard of its own so that no shard holds two.
HEAVY = ("/api/v1/tasks", "/api/v1/templates")


def shards() -> list[list[str]]:
    """The heavy paths alone, then the others dealt round-robin into the remaining lists."""
    paths = [path for path in operations() if path not in HEAVY]
    rest = SHARDS - len(HEAVY)
    return [[path] for path in HEAVY] + [paths[i::rest] for i in range(rest)]


@pytest.mark.parametrize("paths", shards(), ids=[f"{i + 1}-of-{SHARDS}" for i in range(SHARDS)])
def test_no_operation_answers_a_server_error_or_breaks_its_schema(
    paths, live_server, workers, operator, tmp_path
):
    token = api_token_create(user=operator)
    report = tmp_path / "report"
    command = [
        str(SCHEMATHESIS),
        "run",
        f"{live_server.url}/api/v1/openapi.json",
        "--include-path-regex",
        "^(?:" + "|".join(re.escape(path) for path in paths) + ")$",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        "not_a_server_error,response_schema_conformance,no_server_error_in_any_content_type",
        "--mode",
        "all",
        "--generation-allow-x00",
        "true",
        "--phases",
        "examples,coverage,fuzzing",
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
    wanted = {label for path in paths for label in operations()[path]}
    assert wanted <= tested, sorted(wanted - tested)
