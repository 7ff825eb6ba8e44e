"""Units small enough to read in one sitting (docs/architecture.md, issue 32).

Every module of the project is at most 300 lines, and every class or function at most 150,
unless its docstring opens the reason with "Past ~150 lines on purpose" or "Over 150 lines".
Migrations and tests are not scanned; benchmarks (bench/) are, as product code is.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "harness_base",
    "tasks",
    "checkpoints",
    "review",
    "multiagent",
    "cases",
    "agent",
    "dashboard",
    "accounts",
    "harness_site",
    "examples",
    "bench",
)
MODULE_MAX = 300
UNIT_MAX = 150
REASON = re.compile(r"(Past ~150 lines on purpose|Over 150 lines)")


def _sources() -> list[tuple[str, str]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" in rel or path.name.startswith("test_"):
                continue
            found.append((rel, path.read_text()))
    return found


def _long_units(rel: str, source: str) -> list[str]:
    long = []
    for node in ast.walk(ast.parse(source, filename=rel)):
        if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        lines = node.end_lineno - node.lineno + 1
        if lines > UNIT_MAX and not REASON.search(ast.get_docstring(node) or ""):
            long.append(f"{rel}:{node.lineno} {node.name} ({lines} lines)")
    return long


def test_the_scan_reads_the_project():
    # A wrong root or package list would scan nothing and pass whatever the code is.
    rels = {rel for rel, _ in _sources()}
    assert "tasks/services/task_transitions.py" in rels
    assert "bench/runner.py" in rels
    assert len(rels) > 300


def test_no_module_is_over_300_lines():
    long = [
        f"{rel} ({n} lines)"
        for rel, source in _sources()
        if (n := len(source.splitlines())) > MODULE_MAX
    ]
    assert long == [], "split these along their seams:\n" + "\n".join(long)


def test_no_class_or_function_is_over_150_lines_without_a_reason():
    long = [unit for rel, source in _sources() for unit in _long_units(rel, source)]
    assert long == [], (
        "cut these, or open their docstring with the reason ('Over 150 lines: ...'):\n"
        + "\n".join(long)
    )


def test_a_long_unit_without_a_reason_is_found():
    body = "\n".join(f"    x{i} = {i}" for i in range(UNIT_MAX))
    assert _long_units("m.py", f"def f():\n{body}\n")
    reasoned = f'def f():\n    """Over 150 lines: one table."""\n{body}\n'
    assert not _long_units("m.py", reasoned)
