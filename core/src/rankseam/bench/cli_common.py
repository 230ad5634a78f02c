"""What every ``rankseam bench`` command shares: the report's command record, the default
report folder and the common options."""

from __future__ import annotations

import time
from pathlib import Path

import click

__all__ = ["POLICY_HELP", "command_record", "default_out", "plot_option", "progress_option"]

POLICY_HELP = (
    "Comma-separated policy specs: NAME or NAME:KEY=VALUE[:KEY=VALUE...]; 'none' = no rerank. "
    "The same reranker may appear with different options, e.g. "
    "none,identity,mmr:lambda=0.5,mmr:lambda=0.7."
)


def command_record() -> dict[str, object]:
    """The command and its parsed options, for the report's configuration."""
    ctx = click.get_current_context()
    params = {
        k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
        for k, v in ctx.params.items()
    }
    return {"command": ctx.command_path, "options": params}


def default_out(kind: str) -> Path:
    return Path("bench-out") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


#: Options shared by every bench command.
progress_option = click.option(
    "--progress/--no-progress",
    default=True,
    show_default=True,
    help="Progress bars (shown on a terminal only).",
)
plot_option = click.option(
    "--plot/--no-plot",
    default=True,
    show_default=True,
    help="Write report.png (needs matplotlib, the bench extra).",
)
