"""The risk policy: harness.yaml defaults merged with admin-edited rules."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from review.models import ReviewRule
from review.policy import evaluate
from tasks.tools.registry import registry
from tests.factories import ReviewRuleFactory

pytestmark = pytest.mark.django_db


def decide(tool: str, **args):
    return evaluate(tool=registry.get(tool), args=args)


def test_defaults_allow_reads_review_destructive_and_deny_rm_rf_root():
    assert decide("read_file", path="a.txt").action == "allow"
    assert decide("write_file", path="notes.txt", content="x").action == "allow"
    protected = decide("write_file", path="etc/app.conf", content="x")
    assert protected.action == "review" and protected.rules[0]["name"] == "protected-config"
    destructive = decide("delete_file", path="a.txt")
    assert destructive.action == "review"
    assert destructive.expires_after_s == 4 * 3600 and destructive.on_expiry == "reject"
    assert destructive.rules[0]["source"] == "harness.yaml"
    denied = decide("run_command", command="rm -rf / --no-preserve-root")
    assert denied.action == "deny" and "never allowed" in denied.reason


@pytest.mark.parametrize(
    "command", ["ls", "rm -fr /", "rm -r -f /", "rm -Rf /", "find / -delete", "curl x | sh"]
)
def test_every_command_is_reviewed_by_default(command):
    decision = decide("run_command", command=command)

    assert decision.action == "review"
    assert decision.rules[0]["name"] == "commands"


def test_commands_are_reviewed_even_without_any_configured_rule(harness_yaml):
    harness_yaml("retry: {max_attempts: 2}\n")
    decision = decide("run_command", command="ls")

    assert decision.action == "review"
    assert decision.rules[0]["name"] == "execute-default"


def test_admin_rules_run_before_the_configured_ones():
    ReviewRuleFactory(name="scratch-is-fine", tool="delete_file", path_glob="tmp/*", action="allow")
    ReviewRuleFactory(
        name="careful-with-docs",
        path_glob="docs/**",
        approvals_required=2,
        forbid_creator=True,
        expires_after=timedelta(minutes=30),
        on_expiry="fail_task",
    )
    assert decide("delete_file", path="tmp/x.log").action == "allow"
    assert decide("delete_file", path="src/x.py").action == "review"
    docs = decide("write_file", path="docs/a/b.md", content="x")
    assert docs.action == "review" and docs.rules[0]["source"] == "admin"
    assert (docs.approvals_required, docs.forbid_creator) == (2, True)
    assert (docs.expires_after_s, docs.on_expiry) == (1800, "fail_task")


def test_an_admin_allow_never_unblocks_a_configured_deny():
    ReviewRuleFactory(name="trust-shell", tool="run_command", action="allow")
    assert decide("run_command", command="ls").action == "allow"
    assert decide("run_command", command="rm -rf /").action == "deny"


def test_disabled_admin_rules_are_ignored():
    ReviewRuleFactory(name="off", tool="read_file", action="deny", enabled=False)
    assert decide("read_file", path="a.txt").action == "allow"


def test_admin_rule_validation_names_the_bad_field():
    rule = ReviewRule(name="bad", tool="run_command", command_regex="rm (", action="deny")
    with pytest.raises(ValidationError) as exc:
        rule.full_clean()
    assert "command_regex" in exc.value.message_dict
