"""Secrets masked out of what plugins describe about themselves (docs/seam.md, "Trace").

A plugin's ``descriptor`` travels into traces, logs, the command's JSON and MCP answers, which
are as widely read as search results. A first-party plugin leaves secrets out of it; a
third-party one may not, so the host masks, whatever the plugin: :func:`mask_secrets` replaces

- the value of every key named like a secret (``key``, ``token``, ``secret``, ``password``,
  ``passwd``, ``credential``, ``authorization``, ``auth``, ``cookie``, ``signature``,
  ``private``, in any case and as part of a longer name: ``api_key``, ``openai_key``,
  ``X-Auth-Token``; a few public names such as ``max_tokens`` excepted);
- every string shaped like a credential, under any key: provider API keys (``sk-...``,
  ``ghp_...``, ``xoxb-...``, ``AKIA...``, ``AIza...``), bearer and basic authorisation values,
  JSON web tokens, and the password of a URL (``scheme://user:PASSWORD@host``);

with :data:`MASK`, recursively through mappings, lists and tuples. Everything else is kept as
it was (a descriptor is a diagnostic: names, models, options).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret_key", "mask_secrets", "shown_secrets"]

#: What a masked value reads as.
MASK = "***"

_SECRET_KEY = re.compile(
    r"(?:^|[^a-z])keys?$|apikey|api[-_]key|token|secret|passw(?:or)?d|credential|"
    r"authori[sz]ation|(?:^|[-_])auth(?:$|[-_])|cookie|signature|private",
    re.IGNORECASE,
)
#: Key names that contain a secret-like word but name something public.
_PUBLIC_KEYS = frozenset(
    {"max_tokens", "max_output_tokens", "tokens", "token_count", "tokenizer", "input_tokens"}
)
#: Values that say whether a secret is set without showing it: kept as they are.
_PRESENCE = frozenset({"", "set", "unset"})

_CREDENTIAL = re.compile(
    r"""
      \bsk-[A-Za-z0-9_-]{12,}                 # OpenAI-style keys (sk-, sk-proj-, sk-ant-)
    | \b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}
    | \bxox[abprs]-[A-Za-z0-9-]{10,}          # Slack
    | \bAKIA[0-9A-Z]{16}\b                    # AWS access key ids
    | \bAIza[0-9A-Za-z_-]{30,}                # Google API keys
    | \b(?:Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}
    | \beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*   # JSON web tokens
    """,
    re.VERBOSE,
)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@/\s]+(?=@)")


def is_secret_key(name: str) -> bool:
    """Whether a descriptor key names a secret (its value is masked, whatever it is)."""
    return name.lower() not in _PUBLIC_KEYS and bool(_SECRET_KEY.search(name))


def _mask_text(text: str) -> str:
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return _CREDENTIAL.sub(MASK, text)


def mask_secrets(value: Any) -> Any:
    """``value`` (a descriptor: a mapping of JSON-like values) with every secret masked (see
    the module docstring). Mappings come back as dicts, tuples as lists. Under a key named
    like a secret, text and containers are masked whole; numbers, booleans, ``None`` and the
    presence words ``"set"`` / ``"unset"`` are kept (they show nothing)."""
    if isinstance(value, Mapping):
        return {
            key: _masked_whole(item)
            if isinstance(key, str) and is_secret_key(key)
            else mask_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_secrets(item) for item in value]
    if isinstance(value, str):
        return _mask_text(value)
    return value


def _masked_whole(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and value.lower() in _PRESENCE:
        return value
    return MASK


def shown_secrets(value: Any, path: str = "descriptor") -> list[str]:
    """Where ``value`` shows something :func:`mask_secrets` would mask (``descriptor['api_key']``
    ...): what the conformance kit reports of a plugin's descriptor."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            at = f"{path}[{key!r}]"
            if isinstance(key, str) and is_secret_key(key) and _masked_whole(item) != item:
                found.append(at)
            else:
                found.extend(shown_secrets(item, at))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found.extend(shown_secrets(item, f"{path}[{i}]"))
    elif isinstance(value, str) and _mask_text(value) != value:
        found.append(path)
    return found
