"""The documentation site's API reference (docs/api.md, rendered by mkdocstrings) documents the
public surface exactly: every name ``tessera.__all__`` exports, once, each from the module that
defines it (the ``:::`` identifiers griffe reads statically, since ``tessera`` exports lazily),
and nothing else. ``mkdocs build --strict`` (CI) checks that each identifier renders; this test
checks, without mkdocs, that the page and ``__all__`` do not drift apart."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import tessera

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"

#: ``::: tessera.release.answering.answer`` followed by its options, ``heading: "tessera.answer"``.
ENTRY = re.compile(r'^::: ([\w.]+)\.(\w+)\n    options:\n      heading: "tessera\.(\w+)"', re.M)


def entries() -> list[tuple[str, str, str]]:
    """(defining module, name there, public name) for every entry of the API page."""
    return ENTRY.findall(API_PAGE.read_text(encoding="utf-8"))


def test_every_entry_has_its_public_heading() -> None:
    text = API_PAGE.read_text(encoding="utf-8")
    assert len(entries()) == text.count("\n::: ") + text.startswith("::: ")


def test_the_api_page_documents_exactly_the_public_names() -> None:
    documented = [public for _, _, public in entries()]
    assert len(documented) == len(set(documented)), "a name is documented twice"
    public = set(tessera.__all__) - {"__version__"}
    assert set(documented) == public, (
        f"missing from docs/api.md: {sorted(public - set(documented))}; "
        f"not public: {sorted(set(documented) - public)}")


def test_each_entry_points_at_the_exported_object() -> None:
    for module, name, public in entries():
        assert name == public, f"{module}.{name} is documented as tessera.{public}"
        defined = getattr(importlib.import_module(module), name)
        assert defined is getattr(tessera, public), (
            f"tessera.{public} is not {module}.{name}: point docs/api.md at its defining module")
