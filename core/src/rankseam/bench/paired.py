"""Paired comparison of the columns of a quality run, query by query: each column against the
first one (the baseline: put the configuration without the change first), on the headline
queries, per metric: how many queries it wins, loses and ties, and the two-sided **sign test**
p-value over the queries that differ (ties left out). Every column searched the same stores
with the same queries, so the comparison is paired (docs/benchmark-harness.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PAIRED_KEYS", "paired", "paired_markdown", "sign_test"]

#: The metrics compared query by query.
PAIRED_KEYS = ("recall@5", "recall@10", "ndcg@10", "pool_recall")


def sign_test(wins: int, losses: int) -> float:
    """The two-sided exact sign-test p-value of ``wins`` against ``losses`` (ties left out):
    the chance of a split at least this uneven when either side is equally likely. 1.0 when
    nothing differs."""
    if wins < 0 or losses < 0:
        raise ValueError(f"wins and losses are counts >= 0, got {wins} and {losses}")
    n = wins + losses
    if n == 0:
        return 1.0
    low = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(low + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def paired(
    labels: Sequence[str], rows: Mapping[str, Sequence[Mapping[str, float]]]
) -> dict[str, Any]:
    """Each column of ``labels`` after the first against the first: ``rows[label]`` holds the
    per-query metrics of the headline queries, in the same query order for every column."""
    if len(labels) < 2:
        return {}
    base_label = labels[0]
    base = rows[base_label]
    out: dict[str, Any] = {"baseline": base_label, "columns": {}}
    for label in labels[1:]:
        these = rows[label]
        if len(these) != len(base):
            raise ValueError(
                f"column {label!r} has {len(these)} queries, {base_label!r} {len(base)}"
            )
        per: dict[str, Any] = {}
        for key in PAIRED_KEYS:
            wins = sum(1 for a, b in zip(base, these, strict=True) if b[key] > a[key])
            losses = sum(1 for a, b in zip(base, these, strict=True) if b[key] < a[key])
            per[key] = {
                "wins": wins,
                "losses": losses,
                "ties": len(base) - wins - losses,
                "sign_test_p": float(f"{sign_test(wins, losses):.3g}"),
            }
        out["columns"][label] = per
    return out


def paired_markdown(report: Mapping[str, Any]) -> list[str]:
    """The paired table of a report (none when it has no ``paired`` block)."""
    block = report.get("paired") or {}
    columns = block.get("columns") or {}
    if not columns:
        return []
    lines = [
        f"Paired against `{block['baseline']}`, query by query (wins / losses, two-sided sign "
        "test p):",
        "",
        "| column | " + " | ".join(PAIRED_KEYS) + " |",
        "|---|" + "---|" * len(PAIRED_KEYS),
    ]
    for label, per in columns.items():
        cells = [
            f"{per[k]['wins']} / {per[k]['losses']} (p {per[k]['sign_test_p']:.2g})"
            for k in PAIRED_KEYS
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return ["\n".join(lines)]
