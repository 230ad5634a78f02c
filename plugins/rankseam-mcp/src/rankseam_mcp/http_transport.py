"""The streamable HTTP transport of ``rankseam mcp --transport http``: the MCP SDK's own
streamable HTTP app, served by uvicorn on loopback unless the operator says otherwise.

Binding: the default host is ``127.0.0.1``. A host that is not a loopback address (``0.0.0.0``,
a LAN address) is refused unless ``allow_remote`` is set, and then a warning says that the
server has no authentication (anyone who reaches the port can read and write the memory). On
loopback the SDK's DNS-rebinding protection is on (the ``Host`` and ``Origin`` headers must
name a loopback address).

Every request is answered, as on stdio: a body the SDK would take for a notification although
its ``id`` is not a string or an integer (``[7]``, ``{}``, ``true``, ``1.5``, ``1e400``,
``null``) gets an invalid-request error with ``id: null``, and a body that is not a JSON-RPC
message gets the same answer ``rankseam mcp`` gives on stdio (parse error, invalid request,
a batch's errors), status 400. A body longer than ``max_message_bytes`` is answered 413 by the
SDK.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from rankseam_mcp.answers import answer_bad_line, answer_invalid

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "MCP_PATH", "is_loopback", "serve_http"]

log = logging.getLogger("rankseam_mcp")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def answer_body(body: bytes) -> bytes | None:
    """Our answer to a POSTed body the SDK would drop or answer in its validator's words;
    None for a body the SDK serves (a request, a notification, a response)."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(body, by_name=False)
    except Exception:
        return answer_bad_line(body)
    if isinstance(message, types.JSONRPCNotification):
        return answer_invalid(body)
    return None


class AnswerEveryRequest:
    """ASGI middleware: reads a POST's body (up to ``limit`` bytes), answers it when
    :func:`answer_body` has an answer, and otherwise hands it on, replayed, to ``app``."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        kept: list[Message] = []
        body = bytearray()
        whole = False
        while True:
            message = await receive()
            kept.append(message)
            if message.get("type") != "http.request":
                break  # the client went away: the app sees it
            body += message.get("body", b"")
            if len(body) > self.limit:
                break  # the SDK answers 413
            if not message.get("more_body", False):
                whole = True
                break
        answer = answer_body(bytes(body)) if whole else None
        if answer is not None:
            await _respond(send, 400, answer)
            return

        async def replay() -> Message:
            return kept.pop(0) if kept else await receive()

        await self.app(scope, replay, send)


async def _respond(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _security(host: str) -> TransportSecuritySettings:
    if not is_loopback(host):
        # Reached by whatever name the network gives it: the operator chose to expose it.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    named = host if ":" not in host or host.startswith("[") else f"[{host}]"
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", f"{named}:*"]
    origins = [f"http://{h}" for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (``port`` 0: a free one)."""
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


async def serve_http(
    server: MCPServer,
    *,
    sock: socket.socket,
    host: str,
    max_message_bytes: int,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve ``server`` over streamable HTTP on ``sock`` (from :func:`bind`) at
    :data:`MCP_PATH` until interrupted; ``announce`` is given the URL once it listens."""
    import uvicorn

    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        max_request_body_size=max_message_bytes,
        transport_security=_security(host),
        host=host,
    )
    config = uvicorn.Config(
        AnswerEveryRequest(app, max_message_bytes),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
    )
    if announce is not None:
        announce(url_of(sock))
    await uvicorn.Server(config).serve(sockets=[sock])
