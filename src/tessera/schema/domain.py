"""The public schema: attributes with finite, declared domains (docs/theory.md §1).

A :class:`Domain` is 𝔻 = A_1 × … × A_m. Each attribute maps its values to codes ``0..k-1``;
all of Tessera's math runs on codes. The domain must never be read off the data (that leaks:
docs/theory.md §1); :func:`tessera.data.infer.infer_domain` drafts one for a human to edit and says
so.

The attributes and their kinds (:class:`Categorical`, :class:`IntegerRange`, :class:`Binned`,
:class:`Boolean`) are in :mod:`tessera.schema.attributes` and importable from here. This module
reads and writes schemas: YAML or JSON files, a mapping per attribute (:func:`attribute_from_dict`,
checked key by key with hints), or a Private-PGM domain ``{"col": size}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tessera.errors import QueryError, SchemaError, closest, did_you_mean, read_text, syntax_error
from tessera.schema.attributes import INVALID, Attribute, Binned, Boolean, Categorical, IntegerRange

__all__ = [
    "INVALID",
    "Attribute",
    "Binned",
    "Boolean",
    "Categorical",
    "Domain",
    "IntegerRange",
    "attribute_from_dict",
]


_KINDS: dict[str, type[Attribute]] = {
    k.kind: k for k in (Categorical, IntegerRange, Binned, Boolean)
}
_ALIASES = {"int": "integer", "bool": "boolean", "category": "categorical", "numeric": "binned"}


def attribute_from_dict(name: str, spec: Mapping[str, Any]) -> Attribute:
    """Build one attribute from its schema entry (the kinds: :mod:`tessera.schema.attributes`)."""
    if not isinstance(spec, Mapping):
        raise SchemaError(
            f"attribute {name!r}: expected a mapping with a 'type', got {spec!r}",
            hint="e.g. {type: integer, min: 0, max: 99}",
        )
    all_keys = {"type", "missing", "name", "values", "ordered", "min", "max", "edges", "closed",
                "below", "above"}
    if "type" not in spec:  # a misspelt key (tpye: integer) is named, not "unknown type None"
        stray = [k for k in spec if str(k) not in all_keys]
        near = [k for k in stray if closest(str(k), ["type"], 0.6) is not None]
        raise SchemaError(
            f"attribute {name!r}: no 'type'"
            + (f" (unknown key {near[0]!r}, did you mean 'type'?)" if near else
               f" (unknown key {stray[0]!r})" if stray else ""),
            hint=f"add type: one of {sorted(_KINDS)}",
        )
    kind = _ALIASES.get(str(spec.get("type", "")), str(spec.get("type", "")))
    if kind not in _KINDS:
        raise SchemaError(
            f"attribute {name!r}: unknown type {spec.get('type')!r}",
            hint=f"one of {sorted(_KINDS)}; " + (did_you_mean(kind, _KINDS, 0.6) or ""),
        )
    allowed = {
        "categorical": {"values", "ordered"},
        "integer": {"min", "max"},
        "binned": {"edges", "closed", "below", "above"},
        "boolean": set(),
    }[kind] | {"type", "missing", "name"}
    unknown = set(spec) - allowed
    if unknown:
        key = sorted(unknown)[0]
        raise SchemaError(
            f"attribute {name!r} ({kind}): unknown key {key!r}",
            hint=f"allowed keys: {sorted(allowed - {'name'})}; "
            + (did_you_mean(key, allowed, 0.6) or ""),
        )
    missing = bool(spec.get("missing", False))
    try:
        if kind == "categorical":
            if not isinstance(spec.get("values"), (list, tuple)):
                raise SchemaError(
                    f"attribute {name!r} (categorical): 'values' must be a list, "
                    f"got {spec.get('values')!r}",
                    hint="values: [a, b, c]",
                )
            return Categorical(
                name=name,
                values=tuple(spec["values"]),
                is_ordered=bool(spec.get("ordered", False)),
                missing=missing,
            )
        if kind == "integer":
            return IntegerRange(name=name, lo=spec["min"], hi=spec["max"], missing=missing)
        if kind == "binned":
            return Binned(
                name=name,
                edges=tuple(spec["edges"]),
                closed=spec.get("closed", "left"),
                below=bool(spec.get("below", False)),
                above=bool(spec.get("above", False)),
                missing=missing,
            )
        return Boolean(name=name, missing=missing)
    except KeyError as e:
        raise SchemaError(f"attribute {name!r} ({kind}): missing key {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise SchemaError(f"attribute {name!r} ({kind}): {e}") from None


@dataclass(frozen=True)
class Domain:
    """𝔻 = A_1 × … × A_m: the ordered, public attributes.

    ``Domain.size`` is a Python int and may be astronomically large; nothing in Tessera iterates
    over it except brute-force test oracles.
    """

    attributes: tuple[Attribute, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for i, a in enumerate(self.attributes):
            if a.name in index:
                raise SchemaError(f"attribute {a.name!r} declared twice")
            index[a.name] = i
        object.__setattr__(self, "_index", index)

    # -- access ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.attributes)

    def __iter__(self) -> Iterator[Attribute]:
        return iter(self.attributes)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> Attribute:
        return self.attributes[self.index(name)]

    def index(self, name: str) -> int:
        if name not in self._index:
            raise QueryError(
                f"unknown attribute {name!r}", hint=did_you_mean(name, self._index, 0.5)
            )
        return self._index[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        """|𝔻| as an exact integer."""
        return math.prod(self.sizes)

    def project(self, names: Sequence[str]) -> Domain:
        return Domain(tuple(self[n] for n in names))

    # -- I/O ------------------------------------------------------------------------------------
    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Domain:
        """From a schema mapping, or a Private-PGM domain ``{"col": k, ...}`` (codes 0..k-1)."""
        if not isinstance(data, Mapping) or not data:
            raise SchemaError(
                "a schema must be a mapping with an 'attributes' key",
                hint="attributes: {age: {type: integer, min: 0, max: 120}}",
            )
        if "attributes" not in data:
            if all(isinstance(v, int) and not isinstance(v, bool) for v in data.values()):
                small = [
                    SchemaError(
                        f"Private-PGM domain: attribute {k!r} has size {v}",
                        hint="sizes are numbers of codes, ≥ 1",
                    )
                    for k, v in data.items()
                    if v < 1
                ]
                if small:
                    raise SchemaError.combine(small)
                return Domain(
                    tuple(IntegerRange(name=str(k), lo=0, hi=int(v) - 1) for k, v in data.items())
                )
            raise SchemaError(
                "a schema needs an 'attributes' key (or be a Private-PGM domain {col: size})",
                hint=did_you_mean(str(next(iter(data))), ["attributes"], 0.6),
            )
        attrs = data["attributes"]
        items: list[tuple[str, Any] | SchemaError] = []
        if isinstance(attrs, Mapping):
            items = [(str(k), v) for k, v in attrs.items()]
        elif isinstance(attrs, list):
            for i, entry in enumerate(attrs):
                if not isinstance(entry, Mapping) or "name" not in entry:
                    items.append(SchemaError(f"attributes[{i}]: each entry needs a 'name'"))
                else:
                    items.append((str(entry["name"]), entry))
        else:
            raise SchemaError("'attributes' must be a mapping or a list")
        built: list[Attribute] = []
        errors: list[SchemaError] = []
        for item in items:  # every attribute's error, in order, not only the first
            try:
                if isinstance(item, SchemaError):
                    raise item
                built.append(attribute_from_dict(*item))
            except SchemaError as e:
                errors.append(e)
        if errors:
            raise SchemaError.combine(errors)
        return Domain(tuple(built))

    def to_dict(self) -> dict[str, Any]:
        return {"attributes": {a.name: a.to_dict() for a in self.attributes}}

    @staticmethod
    def load(path: str | Path) -> Domain:
        """Load a YAML or JSON schema (or a Private-PGM domain JSON file)."""
        p = Path(path)
        text = read_text(p, "schema", SchemaError)
        try:
            data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as e:
            raise syntax_error(p, "JSON" if p.suffix == ".json" else "YAML", e,
                               SchemaError) from None
        try:
            return Domain.from_dict(data)
        except SchemaError as e:
            raise e.located(str(p)) from None

    def save(self, path: str | Path, *, header: str | None = None) -> None:
        p = Path(path)
        if p.suffix == ".json":
            p.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
            return
        p.write_text(self.to_yaml(header=header))

    def to_yaml(self, *, header: str | None = None) -> str:
        """The schema as YAML text (what :meth:`save` writes), ``header`` comment first."""
        body = yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=100)
        return (header or "") + body
