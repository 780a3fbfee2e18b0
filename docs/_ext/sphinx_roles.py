"""A griffe extension for the API reference: the docstrings cross-reference in Sphinx's roles
(:func:`~tessera.x.y`), which Markdown would show verbatim; each role becomes a code span with
the name Sphinx would print (the last component after ``~``, the text without a leading ``.``).
Only the rendering changes; the docstrings stay as they are."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):`(~?)\.?([^`]+)`")


def _name(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring griffe reads as Markdown code spans."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_name, obj.docstring.value)
