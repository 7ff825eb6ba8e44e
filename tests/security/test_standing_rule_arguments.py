"""A standing rule matches every argument that changes what a call can do: a remembered
`run_command` never covers the same command with network, another timeout, environment or
working directory; a remembered `http_request` never covers another method or URL; a remembered
MCP tool call never covers another value of any argument. Each variant waits for a person, and
a stored rule from before (no pinned arguments) does not widen either."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest
from django.apps import apps as django_apps

from review.models import ReviewRequest, ReviewRule
from review.standing import rule_allows
from tasks.canonical import canonical_hash
from tests.conftest import ApiClient, page_client
from tests.factories import ReviewRuleFactory
from tests.mcp.conftest import McpHttpServer, http_server_start
from tests.security.test_standing_rules import next_call, standing_rule

pytestmark = pytest.mark.django_db(transaction=True)

LS = {"command": "ls"}


def call(tool: str, args: dict) -> list[dict]:
    return [{"call": tool, "args": args}, {"final": "ok"}]


def allowed_by_rule(call_row) -> bool:
    return ReviewRequest.objects.filter(tool_call=call_row, kind="standing_rule").exists()


def assert_waits(outcome: str, call_row) -> None:
    assert outcome == "paused" and call_row.status == "awaiting_review", call_row.arguments
    review = ReviewRequest.objects.get(tool_call=call_row)
    assert (review.kind, review.status) == ("policy", "pending")


@pytest.mark.parametrize(
    "variant",
    [
        {"network": True},
        {"timeout_s": 59},
        {"env": {"LD_PRELOAD": "/workspace/x.so"}},
        {"cwd": "sub"},
    ],
    ids=["network", "timeout", "env", "cwd"],
)
def test_a_remembered_command_does_not_cover_it_with_other_arguments(
    paused_review, operator, variant
):
    review = paused_review(call("run_command", LS), ["run_command"], {"sub/a": "1"}, user=operator)
    rule = standing_rule(operator, review)
    assert rule.command_regex == "^ls$" and rule.pinned_arguments == {}
    outcome, attack = next_call(
        call("run_command", {**LS, **variant}), ["run_command"], user=operator
    )
    assert_waits(outcome, attack)
    assert not allowed_by_rule(attack)
    # The call it was made from is still covered.
    _, same = next_call(call("run_command", LS), ["run_command"], user=operator)
    assert allowed_by_rule(same)


def test_a_command_prefix_rule_pins_the_other_arguments(paused_review, operator):
    approved = {"command": "git status --short", "timeout_s": 10}
    review = paused_review(call("run_command", approved), ["run_command"], {}, user=operator)
    shown = ApiClient(operator).get(f"/api/v1/reviews/{review.id}").json()
    prefix = shown["suggested_rules"][1]
    assert prefix["kind"] == "command_prefix" and prefix["pinned_arguments"] == {"timeout_s": 10}
    # The suggestion names each argument it matches before anyone remembers it.
    assert "timeout_s: exactly 10" in prefix["matches"]
    assert any(line.startswith("network: not set") for line in prefix["matches"])
    page = page_client(operator).get(f"/reviews/{review.id}/").content.decode()
    assert "timeout_s: exactly 10" in page and "network: not set" in page
    standing_rule(operator, review, index=1)
    outcome, longer = next_call(
        call("run_command", {"command": "git status", "timeout_s": 60}),
        ["run_command"],
        user=operator,
    )
    assert_waits(outcome, longer)
    _, same = next_call(
        call("run_command", {"command": "git status", "timeout_s": 10}),
        ["run_command"],
        user=operator,
    )
    assert allowed_by_rule(same)


@pytest.mark.parametrize(
    "variant",
    [
        {"method": "DELETE"},
        {"url": "https://api.example.invalid/v1/admin/users"},
        {"headers": {"X-HTTP-Method-Override": "DELETE"}},
    ],
    ids=["method", "url", "headers"],
)
def test_a_remembered_request_does_not_cover_another_method_or_url(
    paused_review, operator, variant, settings
):
    settings.HARNESS_HTTP_ALLOWLIST = ["https://api.example.invalid"]
    ReviewRuleFactory(name="review-http", tool="http_request")
    approved = {"method": "GET", "url": "https://api.example.invalid/v1/items"}
    review = paused_review(call("http_request", approved), ["http_request"], {}, user=operator)
    rule = standing_rule(operator, review)
    assert rule.pinned_arguments == approved
    outcome, attack = next_call(
        call("http_request", {**approved, **variant}), ["http_request"], user=operator
    )
    assert_waits(outcome, attack)
    _, same = next_call(call("http_request", approved), ["http_request"], user=operator)
    assert allowed_by_rule(same)


@pytest.fixture
def mcp_server(tmp_path, harness_yaml) -> Iterator[McpHttpServer]:
    from tests.conftest import free_port

    server = http_server_start(state=tmp_path / "mcp", port=free_port())
    harness_yaml(
        "review_rules:\n"
        "  - {name: mcp-fill, tool: remote__fill, action: review}\n"
        f"mcp_servers:\n  remote: {{url: '{server.url}'}}\n"
    )
    try:
        yield server
    finally:
        server.process.kill()
        server.process.wait(timeout=10)


def test_a_remembered_mcp_call_does_not_cover_another_value_of_any_argument(
    mcp_server, paused_review, operator
):
    approved = {"path": "fill.bin", "mib": 0}
    review = paused_review(call("remote__fill", approved), ["remote__fill"], {}, user=operator)
    shown = ApiClient(operator).get(f"/api/v1/reviews/{review.id}").json()
    # An MCP tool's rule matches every argument: no path pattern that lets the others vary.
    assert [s["kind"] for s in shown["suggested_rules"]] == ["arguments"]
    assert shown["suggested_rules"][0]["matches"] == [
        "mib: exactly 0",
        'path: exactly "fill.bin"',
        "no other argument",
    ]
    standing_rule(operator, review)
    outcome, attack = next_call(
        call("remote__fill", {"path": "fill.bin", "mib": 500}), ["remote__fill"], user=operator
    )
    assert_waits(outcome, attack)
    assert mcp_server.calls("fill") == [] or all(
        c["args"]["mib"] == 0 for c in mcp_server.calls("fill")
    )
    _, same = next_call(call("remote__fill", approved), ["remote__fill"], user=operator)
    assert allowed_by_rule(same)


def test_a_stored_rule_without_pinned_arguments_does_not_widen():
    """A rule stored before rules pinned their arguments (the migration pins the origin
    call's; with no origin, nothing may be added): network, timeout, env or cwd added to the
    call is not covered."""
    old = ReviewRule(kind="standing", tool="run_command", command_regex="^ls$")
    assert rule_allows(old, tool="run_command", arguments=LS)
    for variant in ({"network": True}, {"timeout_s": 5}, {"env": {"A": "1"}}, {"cwd": "sub"}):
        assert not rule_allows(old, tool="run_command", arguments={**LS, **variant}), variant
    # A rule whose pinned arguments are not an object matches nothing.
    broken = ReviewRule(kind="standing", tool="run_command", command_regex="^ls$")
    broken.pinned_arguments = None
    assert not rule_allows(broken, tool="run_command", arguments=LS)


def test_the_migration_pins_stored_rules_to_the_call_they_were_made_from(paused_review, operator):
    """review.0016 on rules stored before it: each pins its origin call's other arguments; a
    rule without an origin pins nothing (nothing may be added); an MCP path rule becomes
    exact."""
    migration = importlib.import_module("review.migrations.0016_standing_rule_arguments_revoke")
    approved = {"command": "ls", "timeout_s": 5}
    first = paused_review(call("run_command", approved), ["run_command"], {}, user=operator)
    second = paused_review(call("run_command", LS), ["run_command"], {}, user=operator)
    ReviewRequest.objects.filter(pk=second.pk).update(
        original_arguments={"path": "a.txt", "mode": "w"}
    )  # as an MCP tool's call would have been
    old = {"kind": "standing", "action": "allow", "pinned_arguments": {}}
    command = ReviewRule.objects.create(
        name="old-command", tool="run_command", command_regex="^ls$", origin_review=first, **old
    )
    orphan = ReviewRule.objects.create(
        name="old-orphan", tool="run_command", command_regex="^ls$", **old
    )
    mcp = ReviewRule.objects.create(
        name="old-mcp", tool="files__write", path_glob="a.txt", origin_review=second, **old
    )
    for rule in (command, orphan, mcp):  # before: the command alone decided
        arguments = {"path": "a.txt", "mode": "a"} if rule is mcp else {**LS, "network": True}
        assert not rule_allows(rule, tool=rule.tool, arguments=arguments)
    migration.pin_stored_rules(django_apps, None)
    command = ReviewRule.objects.get(pk=command.pk)
    assert command.pinned_arguments == {"timeout_s": 5}
    assert rule_allows(command, tool="run_command", arguments=approved)
    assert not rule_allows(command, tool="run_command", arguments={**approved, "network": True})
    assert ReviewRule.objects.get(pk=orphan.pk).pinned_arguments == {}
    mcp = ReviewRule.objects.get(pk=mcp.pk)
    assert mcp.arguments_hash == canonical_hash({"path": "a.txt", "mode": "w"})
    assert rule_allows(mcp, tool="files__write", arguments={"path": "a.txt", "mode": "w"})
    assert not rule_allows(mcp, tool="files__write", arguments={"path": "a.txt", "mode": "a"})
