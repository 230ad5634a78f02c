"""The version of rankseam: the one place it is written (``core/pyproject.toml`` reads it)."""

__version__ = "0.1.0"
