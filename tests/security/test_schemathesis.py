"""Schemathesis against the live OpenAPI schema, as an operator, on the real stack (a live
server, real rqworkers, PostgreSQL, Redis): any 5xx or response that violates the schema fails.
Data is generated positive and negative (`--mode all`, NUL characters included), and every
request with a body is sent again as text/plain, urlencoded, multipart and with no
Content-Type (the check in schemathesis_hooks.py), since the API parses each as JSON. Sized to
a few minutes on two cores; `SCHEMATHESIS_MAX_EXAMPLES` raises the effort for a deeper run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.services import api_token_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")


def test_no_operation_answers_a_server_error_or_breaks_its_schema(
    live_server, workers, operator, tmp_path
):
    token = api_token_create(user=operator)
    command = [
        str(SCHEMATHESIS),
        "run",
        f"{live_server.url}/api/v1/openapi.json",
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
        str(tmp_path / "report"),
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env, check=False
    )
    assert result.returncode == 0, result.stdout[-12_000:] + result.stderr[-2000:]
