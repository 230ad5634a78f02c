"""A griffe extension for the docs site (mkdocs.yml): the docstrings cite code with Sphinx roles
(:class:`~rankseam.errors.WriteGateError`, :meth:`update`); Markdown has none, so each becomes
a code span with the name a reader would type (``WriteGateError``, ``update``)."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj|const):`(~?)([^`]+)`")


def plain(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(plain, obj.docstring.value)
