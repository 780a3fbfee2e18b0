"""The exact answers of aggregate statements on data (NOT PRIVATE): what ``tessera answer``
estimates, in the rows it publishes (docs/aggregates.md, "Exact answers").

The data are read, validated and bounded per person exactly as
:func:`~tessera.release.aggregates.answer_aggregates` reads them (one
:func:`~tessera.data.source.encode`, the measures carried beside the codes, on the engine that
reads the data), and the linear queries are computed by the same
:func:`~tessera.release.aggregates.exact_linear`: per row, or per person when the unit counts
people (each group counts distinct people and sums each person's clamped total there,
docs/people.md, docs/theory.md §3.14). No noise is drawn, so nothing here is private: every
output carries :data:`~tessera.data.counts.NOT_PRIVATE`, as ``tessera count`` marks its
other answers.

The rows are those of the private release (:data:`~tessera.release.aggregates.COLUMNS`: one
per statement, group and aggregate, every group of the schema's values, empty ones included),
so the two files can be compared line by line: ``answer`` the exact value (a measure's sum
10^e times its integer units, as published), ``noise_scale`` 0 and the interval the answer
itself. An AVG is the exact quotient sum / count; a group without rows (without people) has
no mean: its answer and interval are empty, as the release leaves them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.data.counts import NOT_PRIVATE, PRIVACY_KEY
from tessera.data.source import encode
from tessera.data.table import CsvOptions, ExtraColumns, InvalidValues, OnInvalid, ScanProgress
from tessera.privacy import ONE_ROW, PrivacyUnit
from tessera.release.aggregates import COLUMNS, exact_linear, published_rows, scaled
from tessera.workload.aggregates import AggregateWorkload


@dataclass(frozen=True, eq=False)
class ExactAggregates:
    """The exact answers of an aggregate workload: ``linear`` (every linear query of
    ``workload.linear``, integers; a measure's sum in units of 10^e) and ``frame``, the rows
    ``tessera answer`` publishes (:data:`COLUMNS`) with the exact values; the rows read (after
    the bounding: the rows kept) and dropped, the values outside the schema, and the unit."""

    workload: AggregateWorkload
    unit: PrivacyUnit
    linear: npt.NDArray[np.int64]
    frame: pd.DataFrame
    n_rows: int
    dropped: int
    invalid: tuple[InvalidValues, ...]

    @property
    def empty_means(self) -> int:
        """The AVG rows without a mean (a group without rows, or without people)."""
        return int(self.frame["answer"].isna().sum())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as ``tessera count --json`` writes other answers: the
        :data:`NOT_PRIVATE` marker, the rows read (kept) and dropped, the unit and the rows
        (``answers``: one object per statement, group and aggregate; an empty mean ``null``)."""
        rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                 for k, v in r.items()} for r in self.frame.to_dict("records")]
        return {"privacy": NOT_PRIVATE, "rows": self.n_rows, "dropped_rows": self.dropped,
                "unit": self.unit.text, "answers": rows}

    def write_csv(self, target: str | Path | IO[str]) -> None:
        """The rows as CSV (:data:`COLUMNS`, the header of ``tessera answer``'s file)."""
        if isinstance(target, (str, Path)):
            with open(target, "w", encoding="utf-8", newline="") as f:
                self.write_csv(f)
            return
        self.frame.to_csv(target, index=False)

    def write_json(self, target: str | Path | IO[str]) -> None:
        """:meth:`to_dict` as JSON."""
        text = json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n"
        if isinstance(target, (str, Path)):
            Path(target).write_text(text, encoding="utf-8")
        else:
            target.write(text)

    def write_parquet(self, path: str | Path) -> None:
        """Parquet, marked NOT PRIVATE in the file's metadata (key :data:`PRIVACY_KEY`), as
        ``tessera count`` marks its Parquet answers."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.frame, preserve_index=False)
        meta = dict(table.schema.metadata or {}) | {PRIVACY_KEY.encode(): NOT_PRIVATE.encode()}
        pq.write_table(table.replace_schema_metadata(meta), path)


def exact_aggregates(
    data: Any,
    workload: AggregateWorkload,
    *,
    unit: PrivacyUnit = ONE_ROW,
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
    on_invalid: OnInvalid = "error",
    extra_columns: ExtraColumns = "error",
    scan_progress: ScanProgress | None = None,
) -> ExactAggregates:
    """The exact answers of every aggregate of ``workload`` on ``data`` (path, DataFrame,
    Arrow table, DuckDB relation; a Spark DataFrame or source computes on Spark), NOT PRIVATE
    (module docs).

    The data are encoded as :func:`~tessera.release.aggregates.answer_aggregates` encodes
    them (``on_invalid``, ``extra_columns``, ``csv``, ``table``; the measures carried; with a
    person as the ``unit`` each person's rows bounded to K by
    :data:`~tessera.data.validation.BOUNDING_RULE`) and the linear queries computed by
    :func:`~tessera.release.aggregates.exact_linear`: counting people
    (``unit.counts_people``) a group counts distinct people and a sum adds each person's
    total there, clamped once (docs/people.md). Sums beyond 2^62 are refused, as the release
    refuses them."""
    encoded = encode(data, workload.domain, on_invalid=on_invalid, csv=csv, table=table,
                     scan_progress=scan_progress, unit=unit, extra_columns=extra_columns,
                     measures=tuple(workload.measures))
    linear = exact_linear(workload.domain, workload.linear, encoded)
    frame = exact_frame(workload, linear)
    return ExactAggregates(workload, unit, linear, frame, encoded.n_rows, encoded.dropped,
                           tuple(encoded.invalid))


def exact_frame(workload: AggregateWorkload, linear: npt.NDArray[np.int64]) -> pd.DataFrame:
    """The published rows (:data:`COLUMNS`, in the order of ``tessera answer``) from the exact
    linear answers: a count or sum as it is (a measure's 10^e times its units), an AVG the
    quotient of its sum and count (empty when the count is 0), ``noise_scale`` 0 and the
    95% interval the answer itself (no noise)."""
    rows: list[list[Any]] = []
    for i, head, agg, unit in published_rows(workload, workload.linear):
        if agg.kind == "avg":  # (the sum at i, the count at i + 1)
            s, c = scaled(float(linear[i]), unit), float(linear[i + 1])
            v = s / c if c > 0 else math.nan
        else:
            v = scaled(float(linear[i]), unit)
        rows.append([*head, v, 0.0, v, v])
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.attrs["private"] = False
    return frame
