"""rankseam-learned-locomo: the learned reranker's model for conversational memory.

The model file (``locomo-pool-v1.json``: data, never code; read by rankseam-learned) was
trained on the five LoCoMo dev conversations with ``rankseam train --dataset locomo``, and is
registered under the entry-point group ``rankseam.learned_models`` as ``locomo``. It inherits
the licence of its data, CC BY-NC 4.0 (LICENSE); MODEL_CARD.md says what it was trained on,
its figures, where it helps and where it does not.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["MODEL_FILE", "__version__", "model_path"]

__version__ = "0.1.0"

#: The model file's name inside this package.
MODEL_FILE = "locomo-pool-v1.json"


def model_path() -> Path:
    """The path of the installed model file (the entry point ``locomo`` names this)."""
    return Path(str(resources.files(__name__).joinpath(MODEL_FILE)))
