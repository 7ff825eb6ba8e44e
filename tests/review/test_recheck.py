"""Target fingerprints and the execution-time re-check of approvals (issue 24), in process: what
a review records, what the API and the page show and send back, and how an approval that no
longer holds is refused. The attacks with real workers are in
tests/security/test_approval_recheck*.py."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta

import pytest
import time_machine

from review.models import ReviewRequest, ReviewRule
from review.services import ReviewConflict, review_decide
from tasks.canonical import canonical_hash
from tasks.fingerprint import call_targets
from tasks.models import Task, ToolCall
from tasks.tools.registry import ToolContext, registry
from tests.conftest import approve
from tests.factories import ReviewRuleFactory, run_in_process

ORIGINAL = "port=80\n"
PROPOSED = "port=8080\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def conf_review(paused_review):
    ReviewRuleFactory(name="protected-config", tool="write_file", path_glob="**/*.conf")

    def make(**extra):
        return paused_review(
            [
                {"call": "write_file", "args": {"path": "service.conf", "content": PROPOSED}},
                {"final": "ok"},
            ],
            ["write_file"],
            {"service.conf": ORIGINAL},
            **extra,
        )

    return make


def test_the_api_shows_the_target_fingerprint_next_to_the_arguments_hash(
    conf_review, api_client, operator
):
    review = conf_review()
    body = api_client(operator).get(f"/api/v1/reviews/{review.id}").json()
    fingerprint = body["target_fingerprint"]
    target = {"kind": "file", "key": "service.conf", "sha256": sha(ORIGINAL)}
    assert fingerprint["targets"] == [target]
    assert fingerprint["hash"] == canonical_hash(fingerprint["targets"])
    assert len(body["policy_hash"]) == 64 and len(body["arguments_hash"]) == 64
    assert body["reopened_from_id"] is None and body["changes"] == []
    # The preview is the diff against exactly that state.
    assert "-port=80" in body["preview"] and "+port=8080" in body["preview"]


def test_a_stale_target_hash_is_refused_and_nothing_changes(conf_review, api_client, operator):
    review = conf_review()
    response = api_client(operator).decide(review.id, decision="approve", target_hash="0" * 64)
    assert response.status_code == 409
    assert response.json()["reason"] == "target_changed"
    assert response.json()["errors"][0]["field"] == "target_hash"
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0


def test_the_page_sends_the_target_hash_and_a_changed_file_leads_to_the_new_review(
    conf_review, as_user, operator
):
    review = conf_review()
    client = as_user(operator)
    page = client.get(f"/reviews/{review.id}/").content.decode()
    assert f'name="target_hash" value="{review.target_fingerprint["hash"]}"' in page
    task = Task.objects.get(pk=review.task_id)
    (task.workspace_path / "service.conf").write_text("port=443\n")

    response = client.post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "approve",
            "arguments_hash": canonical_hash(review.arguments),
            "target_hash": review.target_fingerprint["hash"],
        },
    )

    new = ReviewRequest.objects.get(task=task, status="pending")
    assert response.status_code == 302 and response["Location"] == f"/reviews/{new.id}/"
    shown = client.get(response["Location"]).content.decode()
    assert "service.conf changed since the review was shown" in shown
    assert "-port=443" in new.preview
    assert ReviewRequest.objects.get(pk=review.pk).status == "canceled"
    assert (task.workspace_path / "service.conf").read_text() == "port=443\n"


def test_an_edited_approval_binds_the_edited_target(conf_review, operator):
    review = conf_review()
    task = Task.objects.get(pk=review.task_id)
    (task.workspace_path / "other.conf").write_text("x=1\n")
    approve(review, operator, arguments={"path": "other.conf", "content": PROPOSED})
    review.refresh_from_db()
    assert review.target_fingerprint["targets"] == [
        {"kind": "file", "key": "other.conf", "sha256": sha("x=1\n")}
    ]
    assert run_in_process(task) == "succeeded"
    assert (task.workspace_path / "other.conf").read_text() == PROPOSED


def test_a_deny_rule_added_while_the_approved_call_waits_refuses_it(conf_review, operator):
    review = conf_review()
    approve(review, operator)
    ReviewRule.objects.create(name="freeze", tool="write_file", action="deny", reason="freeze")
    task = Task.objects.get(pk=review.task_id)
    assert run_in_process(task) == "succeeded"
    call = ToolCall.objects.get(pk=review.tool_call_id)
    assert call.status == "denied" and call.attempts == 0
    assert (task.workspace_path / "service.conf").read_text() == ORIGINAL


def test_a_target_replaced_by_a_symlink_fails_closed(conf_review, operator, tmp_path):
    review = conf_review()
    approve(review, operator)
    task = Task.objects.get(pk=review.task_id)
    outside = tmp_path / "outside.conf"
    outside.write_text("secret\n")
    (task.workspace_path / "service.conf").unlink()
    os.symlink(outside, task.workspace_path / "service.conf")
    assert run_in_process(task) == "paused"
    new = ReviewRequest.objects.get(task=task, status="pending")
    assert new.reopened_from_id == review.pk
    assert any("service.conf changed since you approved" in c for c in new.changes)
    assert outside.read_text() == "secret\n"


def test_an_approval_past_its_deadline_does_not_run(conf_review, operator):
    review = conf_review()
    deadline = review.requested_at + timedelta(minutes=5)
    ReviewRequest.objects.filter(pk=review.pk).update(expires_at=deadline)
    approve(review, operator)
    task = Task.objects.get(pk=review.task_id)
    with time_machine.travel(deadline + timedelta(minutes=1)):
        assert run_in_process(task) == "paused"
    new = ReviewRequest.objects.get(task=task, status="pending")
    assert any("the approval expired" in c for c in new.changes)
    assert (task.workspace_path / "service.conf").read_text() == ORIGINAL


def test_a_command_is_bound_to_the_workspace_it_runs_in(tmp_path):
    tool = registry.get("run_command")
    ctx = ToolContext(task_id="t", call_id="c", workspace=tmp_path, timeout_s=5)
    (tmp_path / "deploy.sh").write_text("echo hi\n")
    args = tool.args_model.model_validate({"command": "sh deploy.sh"})
    before = call_targets(tool=tool, ctx=ctx, args=args, arguments={"command": "sh deploy.sh"})
    command, workspace = before
    assert command["argv"] == ["/bin/sh", "-c", "sh deploy.sh"] and command["program"]
    assert workspace["kind"] == "workspace" and workspace["files"] == 1
    (tmp_path / "deploy.sh").write_text("rm -rf ~\n")
    after = call_targets(tool=tool, ctx=ctx, args=args, arguments={"command": "sh deploy.sh"})
    assert after[0] == command and after[1]["tree"] != workspace["tree"]


def test_a_request_is_bound_to_its_origin_and_address(settings, tmp_path):
    settings.HARNESS_HTTP_ALLOW_NETWORKS = ["127.0.0.0/8"]
    tool = registry.get("http_request")
    ctx = ToolContext(task_id="t", call_id="c", workspace=tmp_path, timeout_s=5)
    arguments = {"method": "POST", "url": "http://127.0.0.1:8080/hook"}
    args = tool.args_model.model_validate(arguments)
    assert call_targets(tool=tool, ctx=ctx, args=args, arguments=arguments) == [
        {"kind": "http", "key": "http://127.0.0.1:8080", "method": "POST", "address": "127.0.0.1"}
    ]
    # A decision in the web process re-reads only local targets.
    assert call_targets(tool=tool, ctx=ctx, args=args, arguments=arguments, local=True) == []


def test_a_decision_needs_a_pending_review_before_its_target_is_checked(conf_review, operator):
    review = conf_review()
    review_decide(review_id=review.id, user=operator, decision="reject", reason="no")
    with pytest.raises(ReviewConflict) as exc:
        approve(review, operator)
    assert exc.value.reason == ""


def test_an_approver_who_decides_by_permission_not_group_still_gets_the_call_run(
    conf_review, decider
):
    review = conf_review()
    approve(review, decider)
    task = Task.objects.get(pk=review.task_id)
    assert run_in_process(task) == "succeeded"
    assert (task.workspace_path / "service.conf").read_text() == PROPOSED
