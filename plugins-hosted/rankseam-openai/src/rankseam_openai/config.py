"""Settings of the OpenAI-compatible backends, validated from a component's options.

Every mistake is a :class:`~rankseam.errors.ConfigurationError` raised at assembly, with a message
that says how to fix it. Secrets (the API key, extra header values) are held in :class:`Secret`,
whose ``repr`` and ``str`` never show the value.
"""

from __future__ import annotations

import ipaddress
import os
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import attrs

from rankseam.errors import ConfigurationError
from rankseam.plugin import OptionError, option, parse_options
from rankseam.types import frozen_mapping

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_KEY_ENV",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "JSON_MODES",
    "OpenAIOptions",
    "OpenAISettings",
    "Secret",
    "settings_from_options",
]

#: Where ``base_url`` and ``model`` come from when the options do not set them.
ENV_BASE_URL = "RANKSEAM_OPENAI_BASE_URL"
ENV_MODEL = "RANKSEAM_OPENAI_MODEL"
#: The environment variable read for the key when ``api_key`` is not set.
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The default cap on one response body (1 MiB): a decision reply is under 1 kB, a listwise
#: reply a few kB; with 16 requests in flight, at most 16 MiB of bodies are held at once.
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20
#: ``schema``: response_format json_schema; ``json_object``: JSON mode; ``none``: no
#: response_format (the prompt alone asks for JSON); ``auto``: schema, falling back to
#: json_object and then none when the server says it lacks the previous one.
JsonMode = Literal["auto", "schema", "json_object", "none"]
JSON_MODES: tuple[str, ...] = typing.get_args(JsonMode)


class Secret:
    """A secret string. ``repr``/``str`` show ``'***'``; :meth:`reveal` returns the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> Any:  # never pickle a secret into some cache by accident
        raise TypeError("Secret values cannot be pickled")


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def public_url(url: str) -> str:
    """The URL without credentials, query or fragment (safe for descriptors and messages)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@attrs.frozen
class OpenAISettings:
    """Validated settings of one backend instance (see :func:`settings_from_options`)."""

    base_url: str
    model: str
    api_key: Secret | None = attrs.field(repr=False)
    headers: Mapping[str, Secret] = attrs.field(repr=False, converter=frozen_mapping)
    timeout_s: float = 30.0
    deadline_s: float = 60.0
    max_attempts: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    json_mode: str = "auto"
    temperature: float = 0.0
    max_tokens: int = 256
    max_connections: int = 16
    #: The most bytes of one response body that are read (after decompression).
    max_response_bytes: int = 1_048_576
    #: Query string of the base URL (e.g. Azure's ``api-version``). Not a secret: it is part of
    #: the URL that HTTP libraries log. Kept out of descriptors all the same.
    query: str = attrs.field(default="", repr=False)

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions" + (f"?{self.query}" if self.query else "")

    @property
    def loopback(self) -> bool:
        return is_loopback_url(self.base_url)

    def secrets(self) -> tuple[str, ...]:
        """Every secret value (for scrubbing text before it reaches a message or a log)."""
        values = [s.reveal() for s in self.headers.values()]
        if self.api_key is not None:
            values.append(self.api_key.reveal())
        return tuple(v for v in values if len(v) >= 4)

    def descriptor(self) -> dict[str, Any]:
        """JSON-able, secret-free description (header *names* only, key presence only)."""
        return {
            "base_url": public_url(self.base_url),
            "model": self.model,
            "json_mode": self.json_mode,
            "timeout_s": self.timeout_s,
            "deadline_s": self.deadline_s,
            "max_attempts": self.max_attempts,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_response_bytes": self.max_response_bytes,
            "api_key": "set" if self.api_key is not None else "unset",
            "headers": sorted(self.headers),
        }


def _client_headers(_inst: object, _attr: object, headers: Mapping[str, str]) -> None:
    for name in headers:
        if not name:
            raise OptionError("headers", "has a header without a name")
        if name.lower() in ("content-type", "content-length", "host"):
            raise OptionError("headers", f"{name!r} is set by the client; remove it")


@attrs.frozen
class OpenAIOptions:
    """The options of the ``openai`` decision and generation backends
    (``[decision_backends.openai]``, ``[generation_backends.openai]``)."""

    base_url: str | None = option(
        None,
        nonempty=True,
        env=True,
        default_doc=f"${ENV_BASE_URL}, else {DEFAULT_BASE_URL}",
        help="the server's OpenAI-compatible base URL, e.g. 'http://127.0.0.1:8080/v1'",
    )
    model: str | None = option(
        None,
        nonempty=True,
        env=True,
        default_doc=f"${ENV_MODEL}",
        help="the model name the server serves (required here or in the environment)",
    )
    api_key: str | None = option(
        attrs.Factory(lambda: os.environ.get(DEFAULT_KEY_ENV)),
        env=True,
        secret=True,
        default_doc=f'{{"$env" = "{DEFAULT_KEY_ENV}"}}',
        help='the API key; {"$env" = "NAME"} reads it from the environment',
    )
    require_key: bool | None = option(
        None,
        default_doc="true unless the server is on this machine",
        help="refuse to start without an API key",
    )
    timeout_s: float = option(30.0, gt=0, le=3600, help="seconds for one HTTP request")
    deadline_s: float = option(60.0, gt=0, le=86400, help="seconds for one call, retries included")
    max_attempts: int = option(3, ge=1, le=20, help="tries per call (1 = no retry)")
    backoff_s: float = option(0.5, ge=0, le=60, help="first wait between tries, in seconds")
    backoff_max_s: float = option(8.0, ge=0, le=600, help="longest wait between tries")
    headers: Mapping[str, str] = option(
        MappingProxyType({}),
        env=True,
        secret=True,
        validator=_client_headers,
        help='extra HTTP headers, name = value or {"$env" = "NAME"}',
    )
    json_mode: JsonMode = option(
        "auto",
        help="'schema', 'json_object', 'none', or 'auto' (schema, falling back to the others)",
    )
    temperature: float = option(0.0, ge=0, le=2, help="sampling temperature")
    max_tokens: int | None = option(
        None,
        ge=1,
        le=1_000_000,
        default_doc="64 for decisions, 1024 for generation",
        help="most tokens of one reply",
    )
    max_connections: int = option(16, ge=1, le=1024, help="HTTP connections kept open")
    max_response_bytes: int = option(
        DEFAULT_MAX_RESPONSE_BYTES,
        ge=1024,
        le=1 << 30,
        help="most bytes of one response body that are read",
    )


def settings_from_options(
    options: OpenAIOptions | Mapping[str, Any],
    *,
    what: str,
    table: str,
    default_max_tokens: int,
    environ: Mapping[str, str] | None = None,
) -> OpenAISettings:
    """The settings of a backend from its options: as the host checked them, or the table
    ``[table]`` (checked here). ``what`` names the component in messages (e.g.
    ``"decision backend 'openai'"``)."""
    env = os.environ if environ is None else environ
    if not isinstance(options, OpenAIOptions):
        options = parse_options(OpenAIOptions, options, table)

    base_url = options.base_url or env.get(ENV_BASE_URL) or DEFAULT_BASE_URL
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{what}: base_url {public_url(base_url)!r} is not an http(s) URL; set e.g. "
            f"base_url = 'http://127.0.0.1:8080/v1' in [{table}] or {ENV_BASE_URL}"
        )
    if parts.username or parts.password:
        raise ConfigurationError(
            f"{what}: base_url must not hold credentials (user:password@); put the key in "
            f'api_key = {{"$env" = "NAME"}} or a header in [{table}.headers]'
        )
    query = parts.query
    base_url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/")
    if base_url.endswith("/chat/completions"):
        base_url = base_url[: -len("/chat/completions")]

    model = options.model or env.get(ENV_MODEL, "").strip()
    if not model:
        raise ConfigurationError(
            f"{what}: no model given; set model = 'NAME' in [{table}] or the environment "
            f"variable {ENV_MODEL} (the name the server serves, e.g. 'gpt-4o-mini' or the "
            "model a local vLLM / llama.cpp server was started with)"
        )

    key = options.api_key.strip() if options.api_key else None
    loopback = is_loopback_url(base_url)
    require_key = not loopback if options.require_key is None else options.require_key
    if require_key and not key:
        raise ConfigurationError(
            f"{what}: no API key for {public_url(base_url)} (api_key is unset, or names an "
            f"environment variable that is not set; by default it reads {DEFAULT_KEY_ENV}); "
            f'export {DEFAULT_KEY_ENV}=..., or set api_key = {{"$env" = "NAME"}} in [{table}]; '
            "for a server that needs no key (a local vLLM, llama.cpp or Ollama) set "
            "require_key = false"
        )
    return OpenAISettings(
        base_url=base_url,
        model=model,
        api_key=Secret(key) if key else None,
        headers={name: Secret(value) for name, value in options.headers.items()},
        timeout_s=options.timeout_s,
        deadline_s=options.deadline_s,
        max_attempts=options.max_attempts,
        backoff_s=options.backoff_s,
        backoff_max_s=options.backoff_max_s,
        json_mode=options.json_mode,
        temperature=options.temperature,
        max_tokens=default_max_tokens if options.max_tokens is None else options.max_tokens,
        max_connections=options.max_connections,
        max_response_bytes=options.max_response_bytes,
        query=query,
    )
