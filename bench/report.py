"""Render bench/results.md from bench/results/*.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import RESULTS_DIR, RESULTS_MD, results_load

# The missed targets of the committed run, read by a person: next to results.md.
LEVERS_MD = "levers.md"


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _value(stats: dict[str, Any] | None, unit: str) -> str:
    if not stats:
        return "—"
    text = f"{_number(stats['median'])} {unit}"
    if stats.get("n", 1) > 1:
        text += f" (p95 {_number(stats['p95'])}, n={stats['n']})"
    return text


def _others(f: dict[str, Any], reference: str, ratio: str) -> tuple[str, str]:
    """The reference and ratio cells with the row's other contenders (same run) beside them:
    `LangGraph: …<br>DBOS: …` and `1.20× / 0.80× DBOS`."""
    others = f.get("others") or []
    if not others:
        return reference, ratio
    cells = [reference] if f.get("reference") else []
    ratios = [ratio] if f.get("reference") else []
    for other in others:
        cells.append(f"{other['label']}: {_value(other['stats'], f['unit'])}")
        value = f"{other['ratio']:.2f}×" if other.get("ratio") is not None else "—"
        ratios.append(f"{value} {other['label']}")
    return "<br>".join(cells), " / ".join(ratios)


def _met(met: bool | None) -> str:
    return {True: "✅ met", False: "❌ missed", None: "—"}[met]


def _profile_table(entries: list[dict[str, Any]]) -> list[str]:
    lines = ["| own ms/run | cum ms/run | calls/run | function |", "|---:|---:|---:|---|"]
    for e in entries:
        lines.append(
            f"| {e['own_ms_per_run']:.3f} | {e['cum_ms_per_run']:.3f} | "
            f"{e['calls_per_run']:g} | `{e['function']}` |"
        )
    return lines


def _commits_line(results: list[dict[str, Any]]) -> str:
    commits: dict[str, list[str]] = {}
    for r in results:
        env = r["environment"]
        commit = (env.get("git_commit") or "unknown") + (
            " (dirty tree)" if env.get("git_dirty") else ""
        )
        commits.setdefault(commit, []).append(r["name"])
    if len(commits) == 1:
        return f"All results come from commit {next(iter(commits))}."
    return (
        "**Results come from different commits:** "
        + "; ".join(f"{commit}: {', '.join(names)}" for commit, names in sorted(commits.items()))
        + "."
    )


def render(results: list[dict[str, Any]], levers: str = "") -> str:
    lines = ["# Benchmark results", ""]
    if not results:
        return "\n".join([*lines, "No results yet: run `python -m bench run`.", ""])
    env = results[0]["environment"]
    dates = sorted(r["environment"]["date"] for r in results)
    sizes = sorted({r["size"] for r in results})
    lines += [
        f"Produced by `python -m bench run --size {'/'.join(sizes)}` (see "
        "[bench/README.md](README.md)) between "
        f"{dates[0]} and {dates[-1]} on {env['cpu_count']} CPUs (load average "
        f"{', '.join(str(r['environment'].get('load_average_1m')) for r in results)}), PostgreSQL "
        f"{env['postgresql']} (fsync={env.get('postgresql_fsync')}, synchronous_commit="
        f"{env.get('postgresql_synchronous_commit')}) on loopback, Python {env['python']}, "
        + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items())
        + ".",
        "",
        _commits_line(results),
        "",
        "Each figure is the median over repeated runs with its p95 and sample count; **ratio** "
        "is ours ÷ reference, both measured in the same run against the same PostgreSQL; the "
        "target says which direction is better.",
        "",
        "| Figure | Ours | Reference | Ratio | Target | Met? |",
        "|---|---|---|---:|---|---|",
    ]
    missed = []
    for result in results:
        for f in result["figures"]:
            reference = _value(f["reference"], f["unit"])
            if f.get("reference_label") and f["reference"]:
                reference = f"{f['reference_label']}: {reference}"
            ratio = f"{f['ratio']:.2f}×" if f.get("ratio") is not None else "—"
            reference, ratio = _others(f, reference, ratio)
            name = f["figure"] + (f" — {f['note']}" if f.get("note") else "")
            lines.append(
                f"| {name} | {_value(f['ours'], f['unit'])} | {reference} | {ratio} | "
                f"{f.get('target') or '—'} | {_met(f.get('met'))} |"
            )
            if f.get("met") is False:
                missed.append((result, f))
    for result in results:
        if result.get("notes"):
            lines += ["", f"## {result.get('title', result['name'])}", "", result["notes"]]
    if missed and levers.strip():
        # bench/levers.md: written by hand after a run, for the targets it missed — where the
        # time goes (the profiles below) and the next lever for each.
        lines += ["", levers.strip()]
    shown = set()
    if missed:
        lines += ["", "## Where the time goes (missed targets)"]
    for result, f in missed:
        for label, entries in (result.get("profiles") or {}).items():
            if (result["name"], label) in shown or not entries:
                continue
            shown.add((result["name"], label))
            lines += [
                "",
                f"### {result.get('title', result['name'])}: {label}",
                "",
                f"cProfile, entries with the most own time (missed: {f['figure']}).",
                "",
                *_profile_table(entries),
            ]
    return "\n".join(lines) + "\n"


def render_to_file(results_dir: Path = RESULTS_DIR, out: Path = RESULTS_MD) -> Path:
    levers = out.parent / LEVERS_MD
    out.write_text(render(results_load(results_dir), levers.read_text() if levers.exists() else ""))
    return out
