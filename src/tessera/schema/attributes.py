"""The attributes of the public schema: one column each, with a finite, declared set of values
mapped to codes ``0..k-1`` (docs/theory.md §1). A :class:`~tessera.schema.domain.Domain` is their
product.

Attribute kinds:

* :class:`Categorical`: an explicit value list (optionally ordered, which allows ``<``).
* :class:`IntegerRange`: the integers ``min..max``.
* :class:`Binned`: a numeric attribute released in bins with explicit edges; each bin is closed
  on the ``closed`` side, with optional open-ended bins ``below`` the first and ``above`` the last
  edge.
* :class:`Boolean`: ``false``/``true``.

Any attribute may declare ``missing: true``: the missing value (SQL ``NULL``) is then one more
explicit code, the last one, matched by ``IS NULL``. Without it a missing value is an error.

Each kind encodes raw values (:meth:`Attribute.encode`, ``-1`` = :data:`INVALID` outside the
domain), decodes codes, turns the literals of a query (``attr = v``, ``attr < v``) into sets of
codes with a hint when they are invalid, and writes its schema entry (:meth:`Attribute.to_dict`).

Why this module is long (about 510 lines): it is one idea, the attribute kinds of a schema.
The four kinds implement one interface (:class:`Attribute`: encode, decode, literals to codes,
schema entry) and share its small helpers (missing values, comparisons as half-lines); each kind
is about 60–100 lines, and splitting them apart would scatter one contract over four files.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.errors import QueryError, SchemaError, did_you_mean
from tessera.schema.intervals import IntervalSet

__all__ = [
    "INVALID",
    "Attribute",
    "Binned",
    "Boolean",
    "Categorical",
    "Codes",
    "Comparison",
    "IntegerRange",
]

Comparison = Literal["<", "<=", ">", ">="]
Codes = npt.NDArray[np.int64]
INVALID = -1
#: Most values an integer attribute may have: its codes are int32.
MAX_INTEGER_CODES = 2**31


def _null_mask(values: np.ndarray) -> npt.NDArray[np.bool_]:
    return np.asarray(pd.isna(values), dtype=bool)


@dataclass(frozen=True, kw_only=True)
class Attribute(ABC):
    """One column of the public schema. Subclasses fix how values map to codes."""

    name: str
    missing: bool = False

    kind: ClassVar[str] = ""

    # -- size and codes -------------------------------------------------------------------------
    @property
    @abstractmethod
    def n_values(self) -> int:
        """Number of non-missing values."""

    @property
    def size(self) -> int:
        """Number of codes, the missing code included."""
        return self.n_values + int(self.missing)

    @property
    def missing_code(self) -> int | None:
        return self.n_values if self.missing else None

    @property
    def ordered(self) -> bool:
        """Whether ``<``, ``BETWEEN`` and range builders make sense."""
        return True

    def present(self) -> IntervalSet:
        """Codes of the non-missing values (what SQL comparisons can be true on)."""
        return IntervalSet.range(0, self.n_values)

    def all_codes(self) -> IntervalSet:
        return IntervalSet.range(0, self.size)

    # -- encoding -------------------------------------------------------------------------------
    def encode(self, values: Sequence[Any] | np.ndarray | pd.Series) -> Codes:
        """Codes of raw values, ``-1`` (:data:`INVALID`) where a value is outside the domain."""
        if isinstance(values, pd.Series):
            arr = values.to_numpy()
        elif isinstance(values, np.ndarray):
            arr = values
        else:  # a list: keep each element's own type (np.asarray would make all of them text)
            arr = np.empty(len(values), dtype=object)
            arr[:] = list(values)
        if arr.dtype.kind not in "iu":
            arr = arr.astype(object)
        out = np.full(arr.shape, INVALID, dtype=np.int64)
        nulls = _null_mask(arr)
        if self.missing:
            out[nulls] = self.n_values
        if (~nulls).any():
            out[~nulls] = self._encode_present(arr[~nulls])
        return out

    @abstractmethod
    def _encode_present(self, values: np.ndarray) -> Codes:
        """Codes of non-null values (``-1`` if invalid)."""

    def decode(self, codes: npt.ArrayLike) -> list[Any]:
        """Values of codes (labels for bins, ``None`` for missing)."""
        return [self.value(int(c)) for c in np.asarray(codes).ravel()]

    @abstractmethod
    def value(self, code: int) -> Any:
        """The value a code stands for (``None`` for the missing code)."""

    def label(self, code: int) -> str:
        v = self.value(code)
        return "NULL" if v is None else str(v)

    # -- literals in queries --------------------------------------------------------------------
    @abstractmethod
    def code_of(self, literal: Any) -> IntervalSet:
        """Coverage of ``attr = literal``; raises :class:`QueryError` with a hint if invalid.

        Returns an :class:`IntervalSet` rather than an int so that an integer literal outside an
        integer range can be the (valid) contradiction.
        """

    def literal_note(self, literal: Any) -> str | None:
        """Why ``attr = literal`` is valid SQL yet holds for no value (a literal outside an
        integer range, a fraction on an integer attribute), or ``None``: a workload warning."""
        return None

    def compare(self, op: Comparison, literal: Any) -> IntervalSet:
        """Coverage of ``attr op literal`` among the non-missing codes."""
        hint = (
            "use = or IN, or declare the categorical attribute with ordered: true"
            if self.kind == "categorical"
            else f"use = or IN on {self.kind} attribute {self.name!r}"
        )
        raise QueryError(
            f"attribute {self.name!r} ({self.kind}) has no order; '{op}' is undefined", hint=hint
        )

    # -- serialisation --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.kind}
        d.update(self._fields())
        if self.missing:
            d["missing"] = True
        return d

    @abstractmethod
    def _fields(self) -> dict[str, Any]: ...


def _as_number(attr: Attribute, literal: Any) -> int | float:
    """The literal as an exact int when it is one (no float detour), else a float (may be ±inf)."""
    if isinstance(literal, bool) or not isinstance(literal, (int, float, np.integer, np.floating)):
        raise QueryError(
            f"attribute {attr.name!r} is {attr.kind}; {literal!r} is not a number",
            hint=f"compare {attr.name!r} with a number",
        )
    if isinstance(literal, (int, np.integer)):
        return int(literal)
    value = float(literal)
    if math.isnan(value):
        raise QueryError(f"NaN is not a valid literal for {attr.name!r}", hint="use IS NULL")
    return value


@dataclass(frozen=True, kw_only=True)
class Categorical(Attribute):
    """Values from an explicit list; codes follow the list order."""

    values: tuple[str, ...]
    is_ordered: bool = False
    kind: ClassVar[str] = "categorical"
    _index: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        values = tuple(str(v) for v in self.values)
        object.__setattr__(self, "values", values)
        if not values:
            raise SchemaError(f"attribute {self.name!r}: empty value list", hint="list its values")
        seen: dict[str, int] = {}
        for i, v in enumerate(values):
            if v in seen:
                raise SchemaError(f"attribute {self.name!r}: value {v!r} listed twice")
            seen[v] = i
        object.__setattr__(self, "_index", seen)

    @property
    def n_values(self) -> int:
        return len(self.values)

    @property
    def ordered(self) -> bool:
        return self.is_ordered

    def _encode_present(self, values: np.ndarray) -> Codes:
        keys = pd.Series(values).map(_canonical_text)
        return keys.map(self._index).fillna(INVALID).to_numpy(dtype=np.int64)

    def value(self, code: int) -> Any:
        return None if code == self.missing_code else self.values[code]

    def code_of(self, literal: Any) -> IntervalSet:
        key = _canonical_text(literal)
        if key not in self._index:
            raise QueryError(
                f"{literal!r} is not a value of {self.name!r}",
                hint=did_you_mean(key, self.values),
            )
        return IntervalSet.points([self._index[key]])

    def compare(self, op: Comparison, literal: Any) -> IntervalSet:
        if not self.is_ordered:
            return super().compare(op, literal)
        c = self.code_of(literal).min()
        return _halfline(op, c, self.n_values)

    def _fields(self) -> dict[str, Any]:
        d: dict[str, Any] = {"values": list(self.values)}
        if self.is_ordered:
            d["ordered"] = True
        return d


def _canonical_text(value: Any) -> str:
    """Text form used to match data and literals against categorical values (1.0 -> '1')."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    return str(value)


def _halfline(op: Comparison, code: int | float, n: int) -> IntervalSet:
    """Codes c in [0, n) with ``c op code`` (code may be fractional or ±inf)."""
    if math.isinf(code):
        below = code > 0  # every code is below +inf, none below -inf
        return IntervalSet.range(0, n) if below == (op in ("<", "<=")) else IntervalSet.empty()
    if op == "<":
        return IntervalSet.range(0, min(n, math.ceil(code)))
    if op == "<=":
        return IntervalSet.range(0, min(n, math.floor(code) + 1))
    if op == ">":
        return IntervalSet.range(max(0, math.floor(code) + 1), n)
    if op == ">=":
        return IntervalSet.range(max(0, math.ceil(code)), n)
    raise ValueError(op)


@dataclass(frozen=True, kw_only=True)
class IntegerRange(Attribute):
    """The integers ``lo..hi`` (both included); code = value − lo."""

    lo: int
    hi: int
    kind: ClassVar[str] = "integer"

    def __post_init__(self) -> None:
        object.__setattr__(self, "lo", self._bound("min", self.lo))
        object.__setattr__(self, "hi", self._bound("max", self.hi))
        if self.hi < self.lo:
            raise SchemaError(
                f"attribute {self.name!r}: min {self.lo} > max {self.hi}", hint="swap them"
            )
        if self.hi - self.lo + 1 > MAX_INTEGER_CODES:
            raise SchemaError(
                f"attribute {self.name!r} (integer): min {self.lo} to max {self.hi} is "
                f"{self.hi - self.lo + 1:,} values, more than 2**31",
                hint="narrow the range, or declare a binned attribute "
                "(type: binned, edges: [...]) for a wide numeric range",
            )

    def _bound(self, key: str, v: Any) -> int:
        """``min``/``max`` as an int: a whole number (an integral float below 2**53 is fine);
        text, booleans, fractions and floats too large to name one integer are refused."""
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            return int(v)
        if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer():
            if abs(v) < 2.0**53:
                return int(v)
        raise SchemaError(
            f"attribute {self.name!r} (integer): {key} {v!r} is not an integer",
            hint=f"write {key} as a whole number in digits, e.g. {key}: 120; "
            "a float such as 1e23 cannot name one integer exactly",
        )

    @property
    def n_values(self) -> int:
        return int(self.hi - self.lo + 1)

    def _encode_present(self, values: np.ndarray) -> Codes:
        out = np.full(len(values), INVALID, dtype=np.int64)
        if values.dtype.kind in "iu":
            ok = (values >= self.lo) & (values <= self.hi)
            out[ok] = values[ok].astype(np.int64) - self.lo
            return out
        if any(isinstance(v, (bool, np.bool_)) for v in values):  # True is not the integer 1
            values = np.array(
                [None if isinstance(v, (bool, np.bool_)) else v for v in values], dtype=object
            )
        if all(isinstance(v, (int, np.integer)) for v in values):
            # integers stay integers: a float detour loses precision beyond 2**53
            ints = np.array([int(v) for v in values], dtype=object)
            ok = np.array([self.lo <= v <= self.hi for v in ints], dtype=bool)
            out[ok] = (ints[ok] - self.lo).astype(np.int64)
            return out
        nums = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(nums) & (nums == np.round(nums)) & (nums >= self.lo) & (nums <= self.hi)
        # exact for |values| < 2**53; beyond that a float cannot name one integer
        ok &= np.abs(nums) < 2.0**53
        out[ok] = nums[ok].astype(np.int64) - self.lo
        return out

    def value(self, code: int) -> Any:
        return None if code == self.missing_code else self.lo + code

    def code_of(self, literal: Any) -> IntervalSet:
        v = _as_number(self, literal)
        if isinstance(v, float) and not v.is_integer():
            return IntervalSet.empty()  # a valid contradiction: no value of the domain equals it
        if isinstance(v, float) and abs(v) >= 2.0**53:
            raise QueryError(
                f"{v!r} is too large to name one integer exactly",
                hint="write the integer without a decimal point or exponent",
            )
        if not self.lo <= int(v) <= self.hi:
            return IntervalSet.empty()
        return IntervalSet.points([int(v) - self.lo])

    def literal_note(self, literal: Any) -> str | None:
        try:
            v = _as_number(self, literal)
        except QueryError:
            return None  # code_of's error to raise
        if isinstance(v, float) and not v.is_integer():
            return (f"{_number_text(v)} is not an integer, and {self.name} takes integers; "
                    "no row can have this value")
        if isinstance(v, float) and abs(v) >= 2.0**53:
            return None  # code_of refuses it
        if not self.lo <= int(v) <= self.hi:
            return (f"{int(v)} is outside {self.name}'s range {self.lo}..{self.hi}; "
                    "no row can have this value")
        return None

    def compare(self, op: Comparison, literal: Any) -> IntervalSet:
        return _halfline(op, _as_number(self, literal) - self.lo, self.n_values)

    def _fields(self) -> dict[str, Any]:
        return {"min": int(self.lo), "max": int(self.hi)}


@dataclass(frozen=True, kw_only=True)
class Binned(Attribute):
    """A numeric attribute in bins with explicit edges e_0 < … < e_k.

    ``closed='left'``: bins [e_i, e_{i+1}); ``'right'``: (e_i, e_{i+1}]. ``below`` adds a first
    bin of everything under e_0, ``above`` a last bin of everything over e_k. A query bound must
    fall on a bin boundary: a condition that splits a bin cannot be answered from the public
    domain, and Tessera says so instead of guessing.
    """

    edges: tuple[float, ...]
    closed: Literal["left", "right"] = "left"
    below: bool = False
    above: bool = False
    kind: ClassVar[str] = "binned"

    def __post_init__(self) -> None:
        edges = tuple(float(e) for e in self.edges)
        object.__setattr__(self, "edges", edges)
        if len(edges) < 2 and not (self.below or self.above):
            raise SchemaError(f"attribute {self.name!r}: a binned attribute needs ≥ 2 edges")
        if len(edges) < 1:
            raise SchemaError(f"attribute {self.name!r}: a binned attribute needs edges")
        if any(b <= a for a, b in zip(edges, edges[1:])):
            raise SchemaError(
                f"attribute {self.name!r}: edges must be strictly increasing, got {list(edges)}"
            )
        if self.closed not in ("left", "right"):
            raise SchemaError(
                f"attribute {self.name!r}: closed must be 'left' or 'right', not {self.closed!r}"
            )

    @property
    def n_values(self) -> int:
        return len(self.edges) - 1 + int(self.below) + int(self.above)

    def bounds(self, code: int) -> tuple[float, float, bool, bool]:
        """(a, b, a_included, b_included) of a bin."""
        k = code - int(self.below)
        left = self.closed == "left"
        if k < 0:
            return -math.inf, self.edges[0], False, not left
        if k >= len(self.edges) - 1:
            return self.edges[-1], math.inf, left, False
        return self.edges[k], self.edges[k + 1], left, not left

    def _encode_present(self, values: np.ndarray) -> Codes:
        nums = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
        edges = np.asarray(self.edges)
        side = "right" if self.closed == "left" else "left"
        k = np.searchsorted(edges, nums, side=side) - 1  # -1: below e_0; len-1: above e_k
        code = k + int(self.below)
        ok = np.isfinite(nums) & (k >= -int(self.below)) & (k < len(edges) - 1 + int(self.above))
        out = np.full(nums.shape, INVALID, dtype=np.int64)
        out[ok] = code[ok]
        return out

    def value(self, code: int) -> Any:
        if code == self.missing_code:
            return None
        a, b, ai, bi = self.bounds(code)
        fmt = _number_text
        return f"{'[' if ai else '('}{fmt(a)}, {fmt(b)}{']' if bi else ')'}"

    def code_of(self, literal: Any) -> IntervalSet:
        labels = [self.value(c) for c in range(self.n_values)]
        if isinstance(literal, str) and literal in labels:
            return IntervalSet.points([labels.index(literal)])
        raise QueryError(
            f"'=' on binned attribute {self.name!r} needs a bin label, not {literal!r}",
            hint=f"use a bin label such as {labels[0]!r}, or a range aligned to the edges",
        )

    def compare(self, op: Comparison, literal: Any) -> IntervalSet:
        v = _as_number(self, literal)
        keep: list[int] = []
        for code in range(self.n_values):
            a, b, ai, bi = self.bounds(code)
            every, none = _bin_vs_halfline(op, v, a, b, ai, bi)
            if every:
                keep.append(code)
            elif not none:
                raise QueryError(
                    f"'{self.name} {op} {_number_text(v)}' splits bin {self.value(code)} "
                    f"of {self.name!r}",
                    hint="bounds on a binned attribute must fall on its edges "
                    f"[{', '.join(_number_text(e) for e in self.edges)}] (mind < versus <=)",
                )
        return IntervalSet.points(keep)

    def _fields(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "edges": [int(e) if e.is_integer() else e for e in self.edges],
            "closed": self.closed,
        }
        if self.below:
            d["below"] = True
        if self.above:
            d["above"] = True
        return d


def _number_text(x: float) -> str:
    """Shortest exact text of a number (``40`` rather than ``40.0``; never rounded)."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else repr(float(x))


def _bin_vs_halfline(
    op: Comparison, v: float, a: float, b: float, ai: bool, bi: bool
) -> tuple[bool, bool]:
    """Whether every / no point of the bin with bounds (a, b) satisfies ``x op v``."""
    if op == "<":
        return (b < v or (b == v and not bi)), a >= v
    if op == "<=":
        return b <= v, (a > v or (a == v and not ai))
    if op == ">":
        return (a > v or (a == v and not ai)), b <= v
    if op == ">=":
        return a >= v, (b < v or (b == v and not bi))
    raise ValueError(op)


_TRUE = {"true", "t", "1", "yes", "y"}
_FALSE = {"false", "f", "0", "no", "n"}


@dataclass(frozen=True, kw_only=True)
class Boolean(Attribute):
    """``false`` (code 0) and ``true`` (code 1)."""

    kind: ClassVar[str] = "boolean"

    @property
    def n_values(self) -> int:
        return 2

    @property
    def ordered(self) -> bool:
        return False

    def _encode_present(self, values: np.ndarray) -> Codes:
        text = pd.Series(values).map(lambda v: _canonical_text(v).strip().lower())
        out = np.full(len(text), INVALID, dtype=np.int64)
        out[text.isin(_TRUE).to_numpy()] = 1
        out[text.isin(_FALSE).to_numpy()] = 0
        return out

    def value(self, code: int) -> Any:
        return None if code == self.missing_code else bool(code)

    def code_of(self, literal: Any) -> IntervalSet:
        text = _canonical_text(literal).strip().lower()
        if text in _TRUE:
            return IntervalSet.points([1])
        if text in _FALSE:
            return IntervalSet.points([0])
        raise QueryError(
            f"{literal!r} is not a boolean value for {self.name!r}", hint="use TRUE or FALSE"
        )

    def _fields(self) -> dict[str, Any]:
        return {}

