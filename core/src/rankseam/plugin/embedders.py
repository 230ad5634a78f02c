"""The embedder role: the Protocol an embedder implements and the descriptor that names its
vector space (and says how its channel counts in fusion). docs/plugin-api/embedders.md says
what each name is for; an embedder registers itself with
:class:`rankseam.plugin.EmbedderRegister`.

The names are defined in the host's internal modules and re-exported here, the one place a
plugin imports them from.
"""

from __future__ import annotations

from rankseam.embedding import Embedder, EmbedderDescriptor

__all__ = ["Embedder", "EmbedderDescriptor"]
