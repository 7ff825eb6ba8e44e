"""What the New task page offers: the registered agents (harness.yaml `langgraph_graphs`,
`openai_agents`, `pydantic_ai_agents`), the tools of the registry with their risk, the model
endpoints the operator allows and the model names priced in harness.yaml, the budget's
defaults and the files' bounds."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from dashboard.new_task import LOOP
from dashboard.new_task_files import FILES_MAX_BYTES, UPLOAD_MAX_FILES
from harness_base.config import harness_config
from tasks.spec import DELEGATE_TOOL, BudgetSpec, model_endpoints
from tasks.tools.registry import registry
from tasks.web.uploads import UPLOAD_FILE_MAX_BYTES

_AGENT_REGISTRIES = (
    ("langgraph", "langgraph_graphs", "LangGraph graph"),
    ("openai-agents", "openai_agents", "OpenAI Agents SDK agent"),
    ("pydantic-ai", "pydantic_ai_agents", "Pydantic AI agent"),
)


def new_task_choices() -> dict[str, Any]:
    config = harness_config()
    agents = [(LOOP, "Harness loop, with a model")]
    for kind, key, label in _AGENT_REGISTRIES:
        agents += [(f"{kind}:{name}", f"{label}: {name}") for name in sorted(getattr(config, key))]
    tools = []
    for name in registry.names():
        if name == DELEGATE_TOOL:
            continue  # given by `agents` (sub-agents), never chosen on its own
        spec = registry.get(name)
        summary = (spec.description or "").strip().splitlines()
        tools.append(
            {"name": name, "risk": str(spec.risk), "summary": summary[0] if summary else ""}
        )
    budget = BudgetSpec()
    return {
        "agent_choices": agents,
        "tool_choices": tools,
        "endpoints": [url for url in model_endpoints() if url != "*"],
        "default_endpoint": settings.OPENAI_BASE_URL,
        "model_names": sorted({settings.HARNESS_MODEL, *config.pricing} - {""}),
        "budget_defaults": {
            "max_steps": budget.max_steps,
            "max_tokens": budget.max_tokens,
            "session_timeout_s": config.timeouts.session_s,
            "turn_timeout_s": config.timeouts.turn_s,
            "tool_timeout_s": config.timeouts.tool_s,
        },
        "limits": {
            "files": UPLOAD_MAX_FILES,
            "file_bytes": UPLOAD_FILE_MAX_BYTES,
            "files_bytes": FILES_MAX_BYTES,
        },
    }
