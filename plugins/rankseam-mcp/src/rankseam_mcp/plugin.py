"""The ``rankseam`` entry point: adds the ``rankseam mcp`` command (``register_commands``).

Nothing heavy is imported here: the MCP SDK loads only when ``rankseam mcp`` runs.
"""

from __future__ import annotations

from typing import Any

import click

from rankseam.plugin import hookimpl


@click.command(name="mcp")
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="The store file (default: RANKSEAM_DB, else the platform data directory).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help=(
        "A rankseam.toml configuration file (default: RANKSEAM_CONFIG, else ./rankseam.toml, "
        "else rankseam.toml in the user's config folder)."
    ),
)
@click.option("--namespace", "-n", default=None, help="Default namespace of the tools.")
def mcp_command(db: str | None, config_file: str | None, namespace: str | None) -> None:
    """Serve this memory to MCP clients over stdio (tools: add, search, get, delete, stats).

    Configure it in a client as the command `rankseam mcp --db PATH`. Logs go to stderr;
    stdout carries the protocol only. The rerankers and options the client may choose are
    set in rankseam.toml under [plugins.mcp] (default: "none" and "mmr" with its lambda).
    """
    import anyio

    from rankseam import find_config, open_memory
    from rankseam_mcp.policy import ToolPolicy
    from rankseam_mcp.server import build_server
    from rankseam_mcp.stdio import serve_stdio

    overrides: dict[str, Any] = {} if namespace is None else {"namespace": namespace}
    with open_memory(db, config_file=find_config(config_file), **overrides) as memory:
        policy = ToolPolicy.from_mapping(memory.config.plugins.get("mcp", {}))
        server = build_server(memory, policy=policy)
        anyio.run(lambda: serve_stdio(server, max_message_bytes=policy.max_message_bytes))


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(mcp_command)
