"""The version of rankseam (kept equal to ``core/pyproject.toml``)."""

__version__ = "0.1.0"
