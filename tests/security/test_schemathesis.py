"""Schemathesis against the live OpenAPI schema, as an operator, on the real stack (a live
server, real rqworkers, PostgreSQL, Redis): any 5xx or response that violates the schema fails.
Sized to about a minute; `SCHEMATHESIS_MAX_EXAMPLES` raises the effort for a deeper run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.services import api_token_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


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
        "not_a_server_error,response_schema_conformance",
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
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=900, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stdout[-12_000:] + result.stderr[-2000:]
