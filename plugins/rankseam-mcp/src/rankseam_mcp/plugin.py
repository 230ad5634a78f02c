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
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio (what desktop clients start) or streamable HTTP (a long-running server).",
)
@click.option(
    "--host",
    default=None,
    help="HTTP only: the address to bind (default 127.0.0.1; another one needs --allow-remote).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="HTTP only: the port (default 8765; 0 picks a free one, printed on stderr).",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    default=False,
    help=(
        "HTTP only: allow a --host that is not a loopback address. The server has no "
        "authentication: whoever reaches the port reads and writes this memory."
    ),
)
@click.option(
    "--tool-prefix",
    default=None,
    help=(
        'What the tool names start with (default "memory_": memory_search, memory_add, ...; '
        '"" gives the bare names of rankseam-mcp 0.1). Overrides [plugins.mcp] tool_prefix.'
    ),
)
def mcp_command(
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    transport: str,
    host: str | None,
    port: int | None,
    allow_remote: bool,
    tool_prefix: str | None,
) -> None:
    """Serve this memory to MCP clients, over stdio (default) or streamable HTTP. Tools:
    memory_search, memory_add, memory_get, memory_update, memory_list, memory_delete,
    memory_stats.

    Configure it in a client as the command `/absolute/path/to/rankseam mcp --db PATH` (a
    desktop client does not search your virtualenv's PATH). Logs go to stderr; on stdio,
    stdout carries the protocol only. A store that does not exist is not created at start:
    the add tool creates it, and the other tools say so until then. The rerankers and options
    the client may choose are set in rankseam.toml under [plugins.mcp] (default: "none" and
    "mmr" with its lambda).

    With --transport http it serves http://127.0.0.1:8765/mcp (streamable HTTP) until
    interrupted, bound to loopback unless --allow-remote is given with another --host.
    """
    import anyio

    from rankseam.errors import ConfigurationError
    from rankseam_mcp.http_transport import DEFAULT_HOST, DEFAULT_PORT, is_loopback
    from rankseam_mcp.policy import ToolPolicy, check_tool_prefix
    from rankseam_mcp.server import build_server
    from rankseam_mcp.stdio import serve_stdio

    if transport == "stdio" and (host is not None or port is not None or allow_remote):
        raise click.UsageError("--host, --port and --allow-remote apply to --transport http")
    host = DEFAULT_HOST if host is None else host.strip()
    if transport == "http" and not is_loopback(host) and not allow_remote:
        raise click.UsageError(
            f"--host {host} is not a loopback address: the server has no authentication, so "
            "anyone who reaches it could read and write this memory. Add --allow-remote to "
            "bind it anyway (behind a firewall or an authenticating proxy), or leave --host "
            "out to serve on 127.0.0.1"
        )
    if tool_prefix is not None:
        try:
            check_tool_prefix(tool_prefix, "--tool-prefix")
        except ConfigurationError as exc:
            raise click.BadParameter(str(exc), param_hint="--tool-prefix") from None
    slot = open_slot(db, config_file, namespace)
    try:
        policy = ToolPolicy.from_mapping(slot.config.plugins.get("mcp", {}))
        server = build_server(slot, policy=policy, tool_prefix=tool_prefix)
        if transport == "stdio":
            anyio.run(lambda: serve_stdio(server, max_message_bytes=policy.max_message_bytes))
            return
        _serve_http(server, host, DEFAULT_PORT if port is None else port, policy)
    finally:
        slot.close()


def _serve_http(server: Any, host: str, port: int, policy: Any) -> None:
    import anyio

    from rankseam_mcp.http_transport import bind, is_loopback, serve_http

    try:
        sock = bind(host, port)
    except OSError as exc:
        raise click.ClickException(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}"
        ) from None
    if not is_loopback(host):
        click.echo(
            f"rankseam mcp: WARNING: serving on {host}, beyond this machine (--allow-remote). "
            "There is no authentication: anyone who reaches this port can read, change and "
            "delete this memory. Put it behind a firewall or an authenticating proxy.",
            err=True,
        )

    def announce(url: str) -> None:
        click.echo(f"rankseam mcp: serving {url} (streamable HTTP); Ctrl-C stops", err=True)

    try:
        anyio.run(
            lambda: serve_http(
                server,
                sock=sock,
                host=host,
                max_message_bytes=policy.max_message_bytes,
                announce=announce,
            )
        )
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()


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
