"""The generation role: structured generation (the backend Protocol, the request and result,
and the strict parsing and schema checks of model output a backend and its caller share).
docs/plugin-api/generation.md says what each name is for; a backend registers itself with
:class:`rankseam.plugin.GenerationBackendRegister`.

The names are defined in the host's internal modules and re-exported here, the one place a
plugin imports them from.
"""

from __future__ import annotations

from rankseam.generation import (
    GenerationBackend,
    GenerationRequest,
    GenerationResult,
    parse_output,
    thaw,
    validate_output,
)

__all__ = [
    "GenerationBackend",
    "GenerationRequest",
    "GenerationResult",
    "parse_output",
    "thaw",
    "validate_output",
]
