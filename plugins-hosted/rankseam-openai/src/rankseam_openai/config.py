"""Settings of the OpenAI-compatible backends, validated from a component's options.

Every mistake is a :class:`~rankseam.errors.ConfigurationError` raised at assembly, with a message
that says how to fix it. Secrets (the API key, extra header values) are held in :class:`Secret`,
whose ``repr`` and ``str`` never show the value.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs

from rankseam.errors import ConfigurationError
from rankseam.plugin import check_options, is_int, is_real, resolve_env_refs
from rankseam.types import frozen_mapping

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_KEY_ENV",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "JSON_MODES",
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
JSON_MODES = ("auto", "schema", "json_object", "none")


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


OPENAI_OPTIONS = (
    "base_url",
    "model",
    "api_key",
    "require_key",
    "timeout_s",
    "deadline_s",
    "max_attempts",
    "backoff_s",
    "backoff_max_s",
    "headers",
    "json_mode",
    "temperature",
    "max_tokens",
    "max_connections",
    "max_response_bytes",
)


def _number(
    what: str, name: str, value: Any, *, low: float, high: float, low_inclusive: bool = False
) -> float:
    ok = is_real(value)
    if ok:
        ok = (value >= low if low_inclusive else value > low) and value <= high
    if not ok:
        bound = "[" if low_inclusive else "("
        raise ConfigurationError(
            f"{what}: option {name!r} must be a number in {bound}{low}, {high}], got {value!r}"
        )
    return float(value)


def _integer(what: str, name: str, value: Any, *, low: int, high: int) -> int:
    if not is_int(value) or not low <= value <= high:
        raise ConfigurationError(
            f"{what}: option {name!r} must be an integer in {low}..{high}, got {value!r}"
        )
    return value


def _string(what: str, name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{what}: option {name!r} must be a non-empty string")
    return value.strip()


def settings_from_options(
    options: Mapping[str, Any],
    *,
    what: str,
    table: str,
    default_max_tokens: int,
    environ: Mapping[str, str] | None = None,
) -> OpenAISettings:
    """Validate a component's options. ``what`` names the component in messages
    (e.g. ``"decision backend 'openai'"``), ``table`` its configuration table."""
    env = os.environ if environ is None else environ
    check_options(f"{what} (table [{table}])", options, OPENAI_OPTIONS)

    base_url = options.get("base_url") or env.get(ENV_BASE_URL) or DEFAULT_BASE_URL
    base_url = _string(what, "base_url", resolve_env_refs(base_url, what=f"{what} base_url"))
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

    model = options.get("model") or env.get(ENV_MODEL)
    if not model:
        raise ConfigurationError(
            f"{what}: no model given; set model = 'NAME' in [{table}] or the environment "
            f"variable {ENV_MODEL} (the name the server serves, e.g. 'gpt-4o-mini' or the "
            "model a local vLLM / llama.cpp server was started with)"
        )
    model = _string(what, "model", resolve_env_refs(model, what=f"{what} model"))

    raw_key = options.get("api_key", {"$env": DEFAULT_KEY_ENV})
    key_source = (
        f"environment variable {raw_key['$env']}"
        if isinstance(raw_key, Mapping) and "$env" in raw_key
        else "option api_key"
    )
    key = resolve_env_refs(raw_key, what=f"{what} api_key")
    if key is not None and not isinstance(key, str):
        raise ConfigurationError(
            f'{what}: option \'api_key\' must be a string or {{"$env" = "NAME"}}, got a '
            f"{type(key).__name__}"
        )
    key = key.strip() if key else None
    loopback = is_loopback_url(base_url)
    require_key = options.get("require_key", not loopback)
    if not isinstance(require_key, bool):
        raise ConfigurationError(f"{what}: option 'require_key' must be true or false")
    if require_key and not key:
        raise ConfigurationError(
            f"{what}: no API key for {public_url(base_url)} ({key_source} is not set); export "
            f'{DEFAULT_KEY_ENV}=..., or set api_key = {{"$env" = "NAME"}} in [{table}]; for a '
            "server that needs no key (a local vLLM, llama.cpp or Ollama) set require_key = false"
        )

    headers_opt = options.get("headers", {})
    if not isinstance(headers_opt, Mapping):
        raise ConfigurationError(f"{what}: option 'headers' must be a table of name = value")
    headers: dict[str, Secret] = {}
    for name, value in headers_opt.items():
        resolved = resolve_env_refs(value, what=f"{what} header {name!r}")
        if not isinstance(name, str) or not name or not isinstance(resolved, str):
            raise ConfigurationError(
                f'{what}: header {name!r} needs a string value or {{"$env" = "NAME"}} '
                "(is the variable set?)"
            )
        if name.lower() in ("content-type", "content-length", "host"):
            raise ConfigurationError(f"{what}: header {name!r} is set by the client; remove it")
        headers[name] = Secret(resolved)

    timeout_s = _number(what, "timeout_s", options.get("timeout_s", 30.0), low=0, high=3600)
    deadline_s = _number(what, "deadline_s", options.get("deadline_s", 60.0), low=0, high=86400)
    json_mode = options.get("json_mode", "auto")
    if json_mode not in JSON_MODES:
        raise ConfigurationError(
            f"{what}: option 'json_mode' must be one of {list(JSON_MODES)}, got {json_mode!r}"
        )
    return OpenAISettings(
        base_url=base_url,
        model=model,
        api_key=Secret(key) if key else None,
        headers=headers,
        timeout_s=timeout_s,
        deadline_s=deadline_s,
        max_attempts=_integer(what, "max_attempts", options.get("max_attempts", 3), low=1, high=20),
        backoff_s=_number(
            what, "backoff_s", options.get("backoff_s", 0.5), low=0, high=60, low_inclusive=True
        ),
        backoff_max_s=_number(
            what,
            "backoff_max_s",
            options.get("backoff_max_s", 8.0),
            low=0,
            high=600,
            low_inclusive=True,
        ),
        json_mode=json_mode,
        temperature=_number(
            what, "temperature", options.get("temperature", 0.0), low=0, high=2, low_inclusive=True
        ),
        max_tokens=_integer(
            what, "max_tokens", options.get("max_tokens", default_max_tokens), low=1, high=1_000_000
        ),
        max_connections=_integer(
            what, "max_connections", options.get("max_connections", 16), low=1, high=1024
        ),
        max_response_bytes=_integer(
            what,
            "max_response_bytes",
            options.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES),
            low=1024,
            high=1 << 30,
        ),
        query=query,
    )
