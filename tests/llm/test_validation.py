"""The validation funnel: shallow checks on results, stricter checks on risky calls, deep
checks on the final answer, each failure fed back in three lines and retried up to a bound."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from review.models import ReviewRequest
from tasks.models import ToolCall
from tasks.spec import TaskSpec
from tasks.tools.registry import ToolContext, tool
from tests.factories import scripted_model as scripted
from tests.llm.support import create, event_payloads, run

pytestmark = pytest.mark.django_db(transaction=True)

REPORT_SCHEMA = {
    "type": "object",
    "required": ["invoice", "total"],
    "properties": {"invoice": {"type": "string"}, "total": {"type": "number"}},
}


def _feedback_for(task, call_id: str) -> str:
    return ToolCall.objects.get(task=task, call_id=call_id).result["observation"]


def test_a_failing_deep_check_makes_the_model_try_again_and_a_passing_one_ends_the_task():
    task = run(
        create(
            scripted(
                {"final": "the total is 4250"},
                {"call": "write_file", "args": {"path": "out/report.txt", "content": "ok"}},
                {"final": '{"invoice": "INV-2031"}'},
                {"final": '```json\n{"invoice": "INV-2031", "total": 4250}\n```'},
            ),
            ["write_file"],
            checks={"files_exist": ["out/*.txt"], "json_schema": REPORT_SCHEMA},
        )
    )

    assert task.status == "succeeded", task.error_message
    assert '"total": 4250' in task.result
    checked = event_payloads(task, "final_checked")
    assert [c["passed"] for c in checked] == [False, False, True]
    missing, schema = checked[0]["feedback"], checked[1]["feedback"]
    assert len(missing.splitlines()) == 3 and "out/*.txt" in missing.splitlines()[0]
    assert "'total' is a required property" in schema.splitlines()[0]
    assert task.steps_used == 3  # two failed answers and one tool step


def test_the_feedback_reaches_the_model_as_its_next_input(chat_server):
    chat_server.answer("Total: four thousand")
    chat_server.answer("Total: $4,250.00")
    task = run(create({"kind": "openai"}, [], checks={"regex": r"^Total: \$[\d,]+\.\d\d$"}))

    assert task.status == "succeeded" and task.result == "Total: $4,250.00"
    retry = chat_server.requests[1].body["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Total: four thousand"}
    assert retry[-1]["role"] == "user"
    assert retry[-1]["content"].splitlines() == [
        "Error: the final answer does not have the required form",
        r"Expected: an answer matching the regular expression ^Total: \$[\d,]+\.\d\d$",
        "Check: rewrite the final answer in the required form",
    ]


def test_failing_checks_past_the_bound_fail_the_task_with_validation_failed():
    task = run(
        create(scripted(*[{"final": "no"}] * 5), [], checks={"regex": "^yes$", "max_retries": 2})
    )
    assert task.status == "failed"
    assert task.error_class == "validation_failed"
    assert "3 steps in a row failed validation" in task.error_message
    assert len(event_payloads(task, "final_checked")) == 3


def test_a_passing_step_resets_the_bound():
    bad = {"call": "write_file", "args": {"path": "a.txt"}}  # content missing
    good = {"call": "list_files", "args": {}}
    task = run(
        create(
            scripted(bad, bad, good, bad, bad, {"final": "done"}),
            ["write_file", "list_files"],
            checks={"max_retries": 2},
        )
    )
    assert task.status == "succeeded", task.error_message


def test_model_review_sends_a_rejected_answer_back(chat_server):
    chat_server.answer("The invoice total is $4,000.")
    chat_server.answer(
        "FAIL: the invoice says $4,250.00, not $4,000.", prompt_tokens=50, completion_tokens=10
    )
    chat_server.answer("The invoice total is $4,250.00.")
    chat_server.answer("PASS", prompt_tokens=50, completion_tokens=1)
    task = run(
        create(
            {"kind": "openai"},
            [],
            goal="Report the invoice total ($4,250.00).",
            checks={"model_review": {"sample_rate": 1.0, "instructions": "Check the amount."}},
        )
    )

    assert task.status == "succeeded" and task.result == "The invoice total is $4,250.00."
    review = chat_server.requests[1].body
    assert "tools" not in review and review["messages"][0]["content"].startswith("You review")
    assert "Check the amount." in review["messages"][1]["content"]
    feedback = chat_server.requests[2].body["messages"][-1]["content"]
    assert "the invoice says $4,250.00, not $4,000." in feedback.splitlines()[0]
    checked = event_payloads(task, "final_checked")
    assert [(c["passed"], c["reviewed"]) for c in checked] == [(False, True), (True, True)]
    assert task.tokens_used == 2 * 120 + 60 + 51


def test_model_review_runs_only_on_the_sampled_fraction(chat_server):
    chat_server.answer("done")
    task = run(create({"kind": "openai"}, [], checks={"model_review": {"sample_rate": 0.0}}))
    assert task.status == "succeeded"
    assert len(chat_server.requests) == 1


def test_a_model_that_cannot_review_skips_the_review_and_says_so():
    task = run(create(scripted({"final": "done"}), [], checks={"model_review": {}}))
    assert task.status == "succeeded"
    (checked,) = event_payloads(task, "final_checked")
    assert "cannot review" in checked["review_skipped"]


def test_a_write_outside_the_allowed_paths_is_refused_before_anyone_reviews_it():
    task = run(
        create(
            scripted(
                {"call": "write_file", "args": {"path": "etc/app.conf", "content": "x"}},
                {"call": "write_file", "args": {"path": "out/app.conf", "content": "x"}},
                {"final": "done"},
            ),
            ["write_file"],
            checks={"allowed_paths": ["out/**"]},
        )
    )
    # The first call breaks the task's path limit: refused, no review, nothing written.
    refused = ToolCall.objects.get(task=task, call_id="0.0.0")
    assert (refused.status, refused.error_class) == ("failed", "check_failed")
    assert "'etc/app.conf'" in _feedback_for(task, "0.0.0").splitlines()[0]
    assert not (task.workspace_path / "etc").exists()
    # The allowed one still goes through the protected-config review.
    assert task.status == "waiting_review"
    assert ReviewRequest.objects.get(task=task).tool_call.call_id == "0.1.0"


def test_content_over_the_size_limit_is_refused():
    task = run(
        create(
            scripted(
                {"call": "write_file", "args": {"path": "big.txt", "content": "x" * 101}},
                {"final": "done"},
            ),
            ["write_file"],
            checks={"max_write_bytes": 100},
        )
    )
    assert task.status == "succeeded"
    assert not (task.workspace_path / "big.txt").exists()
    assert "at most 100 bytes" in _feedback_for(task, "0.0.0").splitlines()[1]


def test_a_request_to_a_host_off_the_allowlist_never_reaches_review(settings):
    settings.HARNESS_HTTP_ALLOWLIST = ["api.example.com"]
    task = run(
        create(
            scripted(
                {"call": "http_request", "args": {"url": "https://evil.example.net/x"}},
                {"final": "done"},
            ),
            ["http_request"],
        )
    )
    assert task.status == "succeeded"
    assert not ReviewRequest.objects.filter(task=task).exists()
    feedback = _feedback_for(task, "0.0.0").splitlines()
    assert "'evil.example.net' is not allowed" in feedback[0]
    assert "api.example.com" in feedback[1]


def test_a_non_zero_exit_code_goes_back_with_stderr(commands_allowed):
    task = run(
        create(
            scripted(
                {"call": "run_command", "args": {"command": "echo oops >&2; exit 3"}},
                {"final": "gave up"},
            ),
            ["run_command"],
        )
    )
    call = ToolCall.objects.get(task=task)
    assert (call.status, call.error_class) == ("failed", "check_failed")
    assert call.result["result"]["exit_code"] == 3  # the raw result stays for operators
    assert call.result["observation"].splitlines() == [
        "Error: run_command exited with code 3; stdout: (empty)",
        "Expected: exit code 0",
        "Check: stderr: oops",
    ]


class Receipt(BaseModel):
    receipt_id: str
    amount: float


@tool(name="test_partial_receipt", test_only=True)
def partial_receipt(ctx: ToolContext, args: Receipt) -> Receipt:
    """Returns a receipt with a field missing (a broken integration)."""
    return {"receipt_id": args.receipt_id}  # type: ignore[return-value]


def test_a_result_missing_required_fields_fails_its_shallow_check():
    task = run(
        create(
            scripted(
                {"call": "test_partial_receipt", "args": {"receipt_id": "R-1", "amount": 1}},
                {"final": "done"},
            ),
            ["test_partial_receipt"],
        )
    )
    call = ToolCall.objects.get(task=task)
    assert call.error_class == "check_failed"
    assert "amount: Field required" in call.result["observation"].splitlines()[0]


@pytest.mark.parametrize(
    "checks, message",
    [
        ({"regex": "("}, "invalid regular expression"),
        ({"json_schema": {"type": "no-such-type"}}, "invalid JSON schema"),
        ({"files_exist": ["../etc/passwd"]}, "leaves the workspace"),
    ],
)
def test_bad_checks_are_refused_in_the_spec(checks, message):
    with pytest.raises(PydanticValidationError) as exc:
        TaskSpec.model_validate(
            {"title": "t", "goal": "g", "model": scripted({"final": "x"}), "checks": checks}
        )
    assert message in str(exc.value)


def test_a_spec_cannot_carry_an_api_key_instead_of_its_name():
    with pytest.raises(PydanticValidationError):
        TaskSpec.model_validate(
            {"title": "t", "goal": "g", "model": {"kind": "openai", "api_key_env": "sk-live-123"}}
        )
