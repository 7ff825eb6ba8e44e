"""`manage.py seed_demo`: ten tasks that show the harness at work (README "The two
commands" lists them) — two that finish (one of them a group of three sub-agents), eight that
pause for a human decision (a deletion, a `*.conf` change, a ticket whose tool declares its
compensation, the bundled MCP server's destructive tool, a LangGraph interrupt, a LangChain
agent's gated call, the agent SDKs' approval tools). Idempotent: does nothing once demo
tasks exist."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks.models import Task
from tasks.services import task_create
from tasks.spec import TaskSpec
from tasks.tools import registry

DEMO_PREFIX = "Demo: "
# Needs the example tools (HARNESS_TOOL_MODULES=examples.ticket_tools, `harness up`'s default).
TICKET_DEMO = "report the outage (a tool with a compensation)"

DEMO_SPECS: list[dict[str, Any]] = [
    {
        # A multi-agent task: three sub-agents research in parallel, each also adding a line
        # to the group's shared directory (/shared/regions.md); a global checkpoint (with the
        # shared directory's snapshot) is taken when all three have answered; the parent then
        # writes the summary. Its page shows the agents, one timeline lane each, and the
        # group rollback to that cut.
        "title": DEMO_PREFIX + "market survey by three sub-agents",
        "goal": "Survey three regions with one sub-agent each, then summarise their findings.",
        "tools": ["write_file"],
        "shared": True,
        "agents": {
            region: {
                "model": {
                    "kind": "scripted",
                    "script": [
                        {
                            "call": "write_file",
                            "args": {
                                "path": "findings.md",
                                "content": f"# {region}\n\nDemand is steady.\n",
                            },
                        },
                        {
                            "call": "append_file",
                            "args": {
                                "path": "/shared/regions.md",
                                "content": f"- {region}: steady\n",
                            },
                        },
                        {"final": f"{region}: demand is steady."},
                    ],
                },
                "tools": ["write_file", "append_file"],
                "budget": {"max_steps": 5},
            }
            for region in ("north", "south", "west")
        },
        "model": {
            "kind": "scripted",
            "script": [
                {
                    "calls": [
                        {
                            "call": "delegate",
                            "args": {
                                "agent": region,
                                "goal": f"Survey demand in the {region} region.",
                                "inputs": {"region": region},
                            },
                        }
                        for region in ("north", "south", "west")
                    ]
                },
                {
                    "call": "write_file",
                    "args": {
                        "path": "/shared/summary.md",
                        "content": "# Survey\n\nAll three regions report steady demand.\n",
                    },
                },
                {"final": "Summary written to /shared/summary.md."},
            ],
        },
    },
    {
        "title": DEMO_PREFIX + "write release notes",
        "goal": "Read the changelog and write release notes for version 1.2.",
        "tools": ["read_file", "list_files", "write_file", "append_file"],
        "workspace": {
            "files": {
                "CHANGELOG.md": "## 1.2\n- faster checkpoints\n- review queue filters\n",
            }
        },
        "model": {
            "kind": "scripted",
            "script": [
                {"call": "list_files", "args": {}},
                {"call": "read_file", "args": {"path": "CHANGELOG.md"}},
                {
                    "call": "write_file",
                    "args": {
                        "path": "notes/RELEASE-1.2.md",
                        "content": (
                            "# Release 1.2\n\n- Faster checkpoints.\n- Review queue filters.\n"
                        ),
                    },
                },
                {
                    "call": "append_file",
                    "args": {"path": "notes/index.md", "content": "- [1.2](RELEASE-1.2.md)\n"},
                },
                {"final": "Release notes written to notes/RELEASE-1.2.md."},
            ],
        },
    },
    {
        "title": DEMO_PREFIX + "clean up old logs",
        "goal": "Delete the stale log file; keep everything else.",
        "tools": ["list_files", "delete_file"],
        "workspace": {"files": {"logs/old.log": "stale\n" * 20, "README.txt": "keep me\n"}},
        "model": {
            "kind": "scripted",
            "script": [
                {"call": "list_files", "args": {"path": "logs"}},
                # Destructive: the `destructive` review rule pauses the task here.
                {"call": "delete_file", "args": {"path": "logs/old.log"}},
                {"final": "Deleted logs/old.log."},
            ],
        },
    },
    {
        "title": DEMO_PREFIX + "raise the worker limit",
        "goal": "Set max_workers to 8 in service.conf.",
        "priority": "high",
        "tools": ["read_file", "write_file"],
        "workspace": {"files": {"service.conf": "max_workers = 4\nlog_level = info\n"}},
        "model": {
            "kind": "scripted",
            "script": [
                {"call": "read_file", "args": {"path": "service.conf"}},
                # A *.conf file: the `protected-config` review rule pauses the task here.
                {
                    "call": "write_file",
                    "args": {
                        "path": "service.conf",
                        "content": "max_workers = 8\nlog_level = info\n",
                    },
                },
                {"final": "service.conf now allows 8 workers."},
            ],
        },
    },
    {
        # A tool that declares how to undo it (examples/ticket_tools.py, which `harness up`
        # loads): open_ticket's compensation is close_ticket. The shipped `external` rule
        # pauses the ticket for review; once approved, rolling back to before it previews
        # close_ticket under "calls that will be compensated", beside the file restore.
        "title": DEMO_PREFIX + TICKET_DEMO,
        "goal": "Write the incident notes, then open a ticket for the outage.",
        "tools": ["write_file", "open_ticket", "close_ticket"],
        "model": {
            "kind": "scripted",
            "script": [
                {
                    "call": "write_file",
                    "args": {"path": "incident.md", "content": "# Checkout returns 500\n"},
                },
                {"call": "open_ticket", "args": {"title": "Checkout returns 500", "severity": 1}},
                {"final": "Incident notes written and a ticket opened."},
            ],
        },
    },
    {
        "title": DEMO_PREFIX + "tidy the notes (MCP server)",
        "goal": "List the notes kept by the notes MCP server and delete the outdated one.",
        # Every tool of the bundled MCP server (examples/mcp_notes, harness.yaml mcp_servers).
        "tools": ["notes__*"],
        "workspace": {
            "files": {
                "notes/meeting-2023.txt": "Outdated: the 2023 planning meeting.\n",
                "notes/todo.txt": "Ship MCP support.\n",
            }
        },
        "model": {
            "kind": "scripted",
            "script": [
                # readOnlyHint: runs without review.
                {"call": "notes__list_notes", "args": {}},
                # destructiveHint: the `destructive` review rule pauses the task here.
                {"call": "notes__delete_note", "args": {"name": "meeting-2023.txt"}},
                {"final": "Deleted the outdated note meeting-2023.txt."},
            ],
        },
    },
    {
        # A LangGraph graph (examples/langgraph_release.py, harness.yaml langgraph_graphs):
        # its approval step is an interrupt, which pauses the task for review.
        "title": DEMO_PREFIX + "cut release 1.5 (LangGraph)",
        "goal": "Plan the next version, draft its notes and publish after approval.",
        "agent": {
            "kind": "langgraph",
            "graph": "release_bot",
            "input": {"changes": ["fix login redirect", "faster search"], "current": "1.4.2"},
        },
    },
    {
        # A LangChain create_agent graph with HumanInTheLoopMiddleware
        # (examples/langgraph_agent.py): the gated tool call is reviewed (approve, edit, ...).
        "title": DEMO_PREFIX + "announce the release (LangChain agent)",
        "goal": "Announce the release in the team channel.",
        "agent": {
            "kind": "langgraph",
            "graph": "announcer",
            "input": {
                "messages": [
                    {"role": "user", "content": '{"channel": "#general", "text": "v1.5 is out"}'}
                ]
            },
        },
    },
    {
        # An OpenAI Agents SDK agent (examples/openai_agents_agent.py, harness.yaml
        # openai_agents): its `publish` tool has needs_approval, so the task pauses for review.
        "title": DEMO_PREFIX + "release notes 1.5.0 (OpenAI Agents SDK)",
        "goal": "Write the release notes for 1.5.0 and publish them.",
        "agent": {"kind": "openai-agents", "name": "release_writer", "input": "Release 1.5.0"},
    },
    {
        # A Pydantic AI agent (examples/pydantic_ai_agent.py, harness.yaml pydantic_ai_agents):
        # it writes the notes into the workspace, then its requires_approval tool `publish`
        # pauses the task for review (approve, edit the channel, or reject).
        "title": DEMO_PREFIX + "publish the v1.5 changelog (Pydantic AI)",
        "goal": "Write the release notes into the workspace and publish them after approval.",
        "agent": {
            "kind": "pydantic-ai",
            "name": "release_notes",
            "input": "v1.5: faster search, fixed login redirect",
        },
    },
]


class Command(BaseCommand):
    help = "Create a few scripted demo tasks (skipped when demo tasks already exist)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--username",
            default="admin",
            help="the user the demo tasks are created by (default: admin)",
        )

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}; create it first")
        if Task.objects.filter(title__startswith=DEMO_PREFIX).exists():
            self.stdout.write("demo tasks already exist; nothing to do")
            return
        for raw in DEMO_SPECS:
            if raw["title"] == DEMO_PREFIX + TICKET_DEMO and "open_ticket" not in registry.names():
                self.stdout.write("skipped the ticket demo: examples.ticket_tools is not loaded")
                continue
            task = task_create(spec=TaskSpec.model_validate(raw), user=user)
            self.stdout.write(f"created demo task {task.id}: {task.title}")
