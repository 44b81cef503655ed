"""The report of a run: one Markdown table row per mutant, with its outcome and the first test that failed."""

from __future__ import annotations


def write_report(results, report_path: str) -> None:
    """Writes ``results``, the runner's ``(mutant, outcome, detail, seconds)`` each, to ``report_path``."""
    killed = sum(outcome == "killed" for _, outcome, _, _ in results)
    lines = [
        "# Mutation testing report",
        "",
        f"`python tools/mutants`: {killed} of {len(results)} mutants killed. Each row is one deliberate bug",
        "(tools/mutants/) and the first test that failed on it.",
        "",
        "| mutant | file | the bug | outcome | first failure | seconds |",
        "|---|---|---|---|---|---:|",
    ]
    for mutant, outcome, detail, seconds in results:
        detail = detail.replace("|", "\\|")
        lines.append(f"| {mutant.id} | {mutant.path} | {mutant.why} | {outcome} | {detail} | {seconds:.0f} |")
    with open(report_path, "w") as f:
        f.write("\n".join(lines) + "\n")
