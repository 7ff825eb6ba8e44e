"""Which agent runners a worker loads before its first job (HARNESS_WORKER_PRELOAD), and the
dispatch that imports the others when a task of their kind runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from agent.jobs import AGENT_RUNNERS, agent_runner, preloaded_agent_kinds
from tests.conftest import ROOT


def test_registered_preloads_the_kinds_harness_yaml_registers_agents_of(settings, harness_yaml):
    settings.HARNESS_WORKER_PRELOAD = ["registered"]
    harness_yaml("pydantic_ai_agents:\n  helper: 'examples.pydantic_ai_agent:agent'\n")
    assert preloaded_agent_kinds() == ["pydantic-ai"]
    harness_yaml("{}\n")
    assert preloaded_agent_kinds() == []


def test_none_and_a_list_of_kinds(settings):
    settings.HARNESS_WORKER_PRELOAD = ["none"]
    assert preloaded_agent_kinds() == []
    settings.HARNESS_WORKER_PRELOAD = ["langgraph", "openai-agents"]
    assert preloaded_agent_kinds() == ["langgraph", "openai-agents"]


def test_an_unknown_kind_is_a_configuration_error_naming_the_setting(settings):
    settings.HARNESS_WORKER_PRELOAD = ["langgraph", "crewai"]
    with pytest.raises(
        ImproperlyConfigured, match="HARNESS_WORKER_PRELOAD: unknown agent kind crewai"
    ):
        preloaded_agent_kinds()


def test_every_runner_resolves_to_its_task_run_function():
    for kind in AGENT_RUNNERS:
        assert callable(agent_runner(kind))


def test_a_worker_that_preloads_nothing_has_imported_no_agent_sdk():
    """What the lazy dispatch buys: the job module and the worker class import none of the
    SDKs (each takes seconds), so a worker running only the harness's loop starts fast."""
    code = (
        "import django, sys; django.setup(); import agent.worker, agent.jobs; "
        "print(sorted(m for m in ('agents', 'pydantic_ai', 'langgraph.graph') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "harness_site.settings",
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
