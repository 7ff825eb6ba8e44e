"""`./harness replay` runs every saved case and fails when one does (issue #31 item 4), and the
pages: save a task from its page, replay a case from its page, read the comparison."""

from __future__ import annotations

import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from cases.models import Case, CaseRun
from cases.services import case_save
from harness_site.cli import main as cli_main
from harness_site.cli import suites
from tests.cases.conftest import OPEN_POLICY
from tests.conftest import manage_py, page_client
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = [
    {"call": "write_file", "args": {"path": "a.md", "content": "a\n"}},
    {"call": "read_file", "args": {"path": "a.md"}},
    {"final": "done"},
]


@pytest.fixture
def two_cases(harness_dirs, harness_yaml, operator):
    """`green` replays as recorded; `strict` asks for a final answer the recording never gave."""
    harness_yaml(OPEN_POLICY)
    task = scripted_task(SCRIPT, ["write_file", "read_file"], user=operator)
    assert run_in_process(task) == "succeeded", task.error_message
    case_save(task=task, user=operator, name="green", tags=["green"])
    case_save(
        task=task, user=operator, name="strict", criteria={"final": {"equals": "something else"}}
    )


def test_the_suite_fails_when_one_case_fails_and_prints_a_row_per_case(two_cases):
    out = StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("replay_cases", stdout=out)
    assert exit_.value.code == 1
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["case", "passed", "cost_usd", "first", "divergence"]
    green = next(line for line in lines if line.startswith("green"))
    strict = next(line for line in lines if line.startswith("strict"))
    assert green.split()[1] == "yes"
    assert strict.split()[1] == "NO" and "final answer 'done'" in strict
    assert lines[-1] == "2 case(s), 1 failed"
    assert CaseRun.objects.count() == 2


def test_harness_replay_with_a_tag_runs_only_those_cases_and_exits_zero(two_cases, monkeypatch):
    """`harness replay --tag green` through the CLI's entry point; the `manage.py replay_cases`
    child it starts runs in this process (its exit code is the CLI's), on this test's database
    and settings."""
    started, printed = [], []

    def manage_py_in_process(argv: list[str], cwd) -> int:
        assert argv[:2] == [sys.executable, str(Path(cwd) / "manage.py")], argv
        started.append(argv[2:])
        code, out, err = manage_py(*argv[2:])
        printed.append(out + err)
        return code

    monkeypatch.setattr(suites.subprocess, "call", manage_py_in_process)
    code = cli_main(["replay", "--tag", "green"])
    assert code == 0, printed
    assert started == [["replay_cases", "--tag", "green"]]
    assert "1 case(s), 0 failed" in printed[0]
    assert list(CaseRun.objects.values_list("case__name", flat=True)) == ["green"]


def test_an_operator_saves_a_task_and_replays_it_from_the_pages(
    harness_dirs, harness_yaml, operator
):
    harness_yaml(OPEN_POLICY)
    task = scripted_task(SCRIPT, ["write_file", "read_file"], user=operator)
    assert run_in_process(task) == "succeeded", task.error_message
    client = page_client(operator)
    assert b'data-testid="save-case"' in client.get(f"/tasks/{task.id}/").content
    saved = client.post(f"/tasks/{task.id}/save-case/", {"name": "from the page", "tags": "ui"})
    case = Case.objects.get(name="from the page")
    assert saved.status_code == 302 and saved["Location"] == f"/cases/{case.id}/"
    assert case.tags == ["ui"] and case.workspace == {}
    assert b"from the page" in client.get("/cases/?tag=ui").content
    started = client.post(f"/cases/{case.id}/replay/", {"on_divergence": "stop"})
    run = CaseRun.objects.get(case=case)
    assert started.status_code == 302 and started["Location"] == f"/cases/runs/{run.id}/"
    run_in_process(run.task)
    page = client.get(f"/cases/runs/{run.id}/").content.decode()
    assert '<strong data-testid="replay-verdict">passed</strong>' in page
    assert 'class="first-divergent"' not in page
