"""The validation funnel: cheap checks everywhere, stricter ones where it matters.

- shallow, on every tool result: the declared result model (required fields, format), a
  non-zero `exit_code`, an HTTP error status;
- stricter, on write, destructive and external calls before they run (and before a human is
  asked to review them): allowed paths, allowed hosts, size limits;
- deep, on the final answer, as declared in the TaskSpec `checks`: files that must exist, a
  regex, a JSON schema, and a model review on a sampled fraction of tasks.

A failed check goes back to the model as compact feedback of at most three lines (what
happened, what was expected, what to check); the loop lets the model try again up to
`max_retries` steps in a row, then fails the task with `validation_failed`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
from django.conf import settings
from pydantic import ValidationError

from agent.llm.base import ModelAdapter, ModelDecision, ModelError
from agent.tools.http import host_allowed, url_allowed
from harness_base.config import ValidationConfig, compile_pattern
from tasks.feedback import compact_feedback
from tasks.json_schema import json_schema_validator
from tasks.paths import PathEscapeError, call_paths, glob_match, resolve_in_workspace
from tasks.spec import ChecksSpec
from tasks.tools.registry import ToolSpec

# Tool-call error classes that count as failed checks for the retry bound.
CHECK_ERROR_CLASSES = frozenset({"invalid_call", "invalid_arguments", "check_failed"})
SIZED_ARGUMENTS = ("content", "body")


@dataclass(frozen=True)
class CheckFailure:
    what: str
    expected: str
    check: str

    @property
    def feedback(self) -> str:
        return compact_feedback(what=self.what, expected=self.expected, check=self.check)


@dataclass(frozen=True)
class CheckLimits:
    allowed_paths: list[str] | None
    allowed_hosts: list[str] | None
    max_write_bytes: int
    max_retries: int


def check_limits(*, config: ValidationConfig, checks: ChecksSpec | None) -> CheckLimits:
    """harness.yaml `validation` narrowed by the task's `checks`."""
    checks = checks or ChecksSpec()
    return CheckLimits(
        allowed_paths=checks.allowed_paths,
        allowed_hosts=checks.allowed_hosts,
        max_write_bytes=min(
            config.max_write_bytes, checks.max_write_bytes or config.max_write_bytes
        ),
        max_retries=config.max_retries if checks.max_retries is None else checks.max_retries,
    )


# --- stricter checks on high-risk calls, before they run ------------------------------------


def check_call(*, tool: ToolSpec, args: dict[str, Any], limits: CheckLimits) -> CheckFailure | None:
    if tool.risk == "read":
        return None
    if limits.allowed_paths is not None:
        for path in call_paths(args):
            if not any(glob_match(path, pattern) for pattern in limits.allowed_paths):
                return CheckFailure(
                    what=f"{tool.name} may not touch {path!r} in this task",
                    expected=f"a path matching one of: {', '.join(limits.allowed_paths)}",
                    check="write inside the allowed paths",
                )
    for key in SIZED_ARGUMENTS:
        value = args.get(key)
        if isinstance(value, str) and len(value.encode()) > limits.max_write_bytes:
            return CheckFailure(
                what=f"{tool.name} {key} is {len(value.encode())} bytes",
                expected=f"at most {limits.max_write_bytes} bytes",
                check=f"send smaller pieces (e.g. several append_file calls) or less {key}",
            )
    url = args.get("url")
    if isinstance(url, str):
        host = urlsplit(url).hostname or ""
        allowlist = list(settings.HARNESS_HTTP_ALLOWLIST)
        if not url_allowed(url) or (
            limits.allowed_hosts is not None and not host_allowed(host, limits.allowed_hosts)
        ):
            hosts = limits.allowed_hosts if limits.allowed_hosts is not None else allowlist
            return CheckFailure(
                what=f"host {host!r} is not allowed for {tool.name}",
                expected=f"one of: {', '.join(hosts) or '(no host is allowed)'}",
                check="use an allowed host or do without the request",
            )
    return None


# --- shallow checks on every result ------------------------------------------------------------


def _tail(text: Any, limit: int = 160) -> str:
    text = " ".join(str(text or "").split())
    return text[-limit:] if text else "(empty)"


def check_result(*, tool: ToolSpec, result: Any) -> CheckFailure | None:
    if tool.result_model is not None:
        try:
            tool.result_model.model_validate(result)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "result"
            return CheckFailure(
                what=f"{tool.name} returned a malformed result ({field}: {first['msg']})",
                expected=f"a result with the fields of {tool.result_model.__name__}",
                check="call the tool again; if it keeps failing, use another approach",
            )
    if not isinstance(result, dict):
        return None
    exit_code = result.get("exit_code")
    if isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0:
        return CheckFailure(
            what=f"{tool.name} exited with code {exit_code}; stdout: {_tail(result.get('stdout'))}",
            expected="exit code 0",
            check=f"stderr: {_tail(result.get('stderr'))}",
        )
    status = result.get("status")
    if isinstance(status, int) and isinstance(result.get("headers"), dict) and status >= 400:
        return CheckFailure(
            what=f"{tool.name} got HTTP {status}",
            expected="a 2xx or 3xx response",
            check=f"response body: {_tail(result.get('body'))}",
        )
    return None


# --- deep checks on the final answer ----------------------------------------------------------

_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)

REVIEW_SYSTEM = (
    "You review the final answer of an AI agent against its goal. Answer PASS on the first "
    "line if the answer fully and correctly achieves the goal; otherwise answer FAIL: followed "
    "by the single most important problem, in one sentence."
)


@dataclass(frozen=True)
class FinalVerdict:
    failure: CheckFailure | None = None
    # Model usage of the review, when one ran.
    review: ModelDecision | None = None
    # Why a sampled review did not run (adapter cannot review, model error).
    review_skipped: str = ""


def in_sample(task_id: Any, rate: float) -> bool:
    """Deterministic per task, so a resumed task decides the same way."""
    if rate >= 1:
        return True
    bucket = int(hashlib.sha256(str(task_id).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return bucket < rate


def _missing_files(workspace: Path, patterns: list[str]) -> list[str]:
    missing = []
    for pattern in patterns:
        if any(ch in pattern for ch in "*?["):
            found = any(p.is_file() and not p.is_symlink() for p in workspace.glob(pattern))
        else:
            try:
                found = resolve_in_workspace(workspace, pattern).is_file()
            except PathEscapeError:
                found = False
        if not found:
            missing.append(pattern)
    return missing


def _json_answer(final: str) -> Any:
    fenced = _FENCE.match(final)
    return json.loads(fenced.group(1) if fenced else final)


def check_final(
    *,
    final: str,
    checks: ChecksSpec | None,
    workspace: Path,
    task_id: Any,
    goal: str,
    model: ModelAdapter,
    timeout_s: float,
) -> FinalVerdict:
    if checks is None:
        return FinalVerdict()
    missing = _missing_files(workspace, checks.files_exist)
    if missing:
        return FinalVerdict(
            failure=CheckFailure(
                what=f"required file(s) missing: {', '.join(missing)}",
                expected=f"these files in the workspace: {', '.join(checks.files_exist)}",
                check="create the missing files before giving the final answer",
            )
        )
    if checks.regex is not None and not compile_pattern(checks.regex, multiline=True).search(final):
        return FinalVerdict(
            failure=CheckFailure(
                what="the final answer does not have the required form",
                expected=f"an answer matching the regular expression {checks.regex}",
                check="rewrite the final answer in the required form",
            )
        )
    if checks.json_schema is not None:
        try:
            document = _json_answer(final)
        except ValueError as exc:
            return FinalVerdict(
                failure=CheckFailure(
                    what=f"the final answer is not JSON ({exc})",
                    expected="a JSON document valid against the task's schema",
                    check="answer with the JSON document only",
                )
            )
        validator = json_schema_validator(schema=checks.json_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
            return FinalVerdict(
                failure=CheckFailure(
                    what=f"the final answer breaks the JSON schema at {where}: {error.message}",
                    expected="a JSON document valid against the task's schema",
                    check=f"fix {where} and answer again",
                )
            )
    review = checks.model_review
    if review is None or not in_sample(task_id, review.sample_rate):
        return FinalVerdict()
    if not model.can_complete:
        return FinalVerdict(review_skipped=f"the {model.name} model cannot review answers")
    prompt = (
        f"Goal:\n{goal[:8000]}\n\n"
        + (f"Review instructions:\n{review.instructions}\n\n" if review.instructions else "")
        + f"Final answer:\n{final[:8000]}"
    )
    try:
        usage = model.complete(system=REVIEW_SYSTEM, prompt=prompt, timeout_s=timeout_s)
    except ModelError as exc:
        return FinalVerdict(review_skipped=f"review failed: {exc}")
    verdict = usage.text.strip()
    if verdict.upper().startswith("PASS"):
        return FinalVerdict(review=usage)
    reason = verdict.split(":", 1)[1].strip() if ":" in verdict.split("\n", 1)[0] else verdict
    return FinalVerdict(
        review=usage,
        failure=CheckFailure(
            what=f"a review of the final answer found a problem: {reason or 'no reason given'}",
            expected="an answer that fully achieves the goal",
            check="address the problem, then answer again",
        ),
    )
