"""What the document store and the two components share: Haystack's serialisation of their
settings, and the check of a number of documents."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from haystack import default_from_dict, default_to_dict

from rankseam.errors import ValidationError
from rankseam.plugin import is_int

__all__ = ["Serialised", "check_top_k"]


def check_top_k(value: object, name: str = "top_k") -> int:
    """``value`` as a positive number of documents, or a ``ValidationError`` naming it."""
    if not is_int(value) or value < 1:  # type: ignore[operator]
        raise ValidationError(f"{name} must be a positive whole number of documents, got {value!r}")
    return int(value)  # type: ignore[arg-type]


class Serialised:
    """``to_dict`` / ``from_dict`` as Haystack writes them: the ``__init__`` arguments named in
    ``SETTINGS``, each read from the attribute of its name (:meth:`settings` may adjust them;
    an override calls ``Serialised.settings(self)``: Haystack's ``@component`` makes a new
    class, which a bare ``super()`` in the decorated class's body does not know)."""

    SETTINGS: ClassVar[tuple[str, ...]] = ()

    def settings(self) -> dict[str, Any]:
        """The ``__init__`` arguments that make this object again."""
        return {name: getattr(self, name) for name in self.SETTINGS}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, **self.settings())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return default_from_dict(cls, data)
