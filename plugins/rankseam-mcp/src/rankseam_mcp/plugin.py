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
    """Serve this memory to MCP clients over stdio (tools: add, search, get, update, list,
    delete, stats).

    Configure it in a client as the command `rankseam mcp --db PATH`. Logs go to stderr;
    stdout carries the protocol only. A store that does not exist is not created at start:
    the add tool creates it, and the other tools say so until then. The rerankers and options
    the client may choose are set in rankseam.toml under [plugins.mcp] (default: "none" and
    "mmr" with its lambda).
    """
    import anyio

    from rankseam_mcp.policy import ToolPolicy
    from rankseam_mcp.server import build_server
    from rankseam_mcp.stdio import serve_stdio

    slot = open_slot(db, config_file, namespace)
    try:
        policy = ToolPolicy.from_mapping(slot.config.plugins.get("mcp", {}))
        server = build_server(slot, policy=policy)
        anyio.run(lambda: serve_stdio(server, max_message_bytes=policy.max_message_bytes))
    finally:
        slot.close()


def open_slot(db: str | None, config_file: str | None, namespace: str | None) -> Any:
    """The store of ``db`` when it exists, else a slot that opens it when it does (a
    configuration mistake raises here, before anything is served)."""
    from rankseam import ConfigurationError, find_config, open_memory
    from rankseam_mcp.slot import MemorySlot

    overrides: dict[str, Any] = {} if namespace is None else {"namespace": namespace}
    config = find_config(config_file)

    def opener(create: bool) -> Any:
        return open_memory(db, config_file=config, create=create, **overrides)

    try:
        memory = opener(False)
    except ConfigurationError as missing:
        # The configuration itself is checked on a scratch in-memory store: its mistakes
        # stop the server here; otherwise the store is what is missing (or unreachable).
        with open_memory(":memory:", config_file=config, **overrides) as scratch:
            settings = scratch.config
        click.echo(
            f"rankseam mcp: {missing}. Serving anyway: the add tool creates the store; the "
            "other tools answer this error until it exists.",
            err=True,
        )
        return MemorySlot.on_demand(opener, settings)
    return MemorySlot.on_demand(opener, memory.config, opened=memory)


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(mcp_command)
