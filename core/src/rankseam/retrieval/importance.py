"""The importance prior: ranks the memories other channels admitted by their importance.

It never admits a memory on its own (``admits = False``). Equal importances share a rank, so a
store where every memory has the default importance 0.5 is ranked exactly as without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rankseam.errors import ConfigurationError
from rankseam.plugin import ScoredKey, SourceRequest

__all__ = ["ImportanceSource"]


class ImportanceSource:
    admits = False
    needs_query_vector = False

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        if not request.admitted:
            return []
        scores = request.reader.importance(request.admitted)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ImportanceSource:
        if options:
            raise ConfigurationError(
                f"the importance source takes no options, got {sorted(options)}; remove them"
            )
        return cls()
