"""The hooks of rankseam-learned (filled in as the components land)."""

from __future__ import annotations
