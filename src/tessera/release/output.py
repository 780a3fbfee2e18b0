"""Writing a release's answers: CSV or Parquet, marked NOT PRIVATE when the noise was seeded.

Predicate workloads are written one row per query (:meth:`Release.to_frame`). Structured ones
are written as the *long* table of :mod:`tessera.data.counts` — ``family, cell`` (the predicate
queries first, with ``family`` empty and ``cell`` the query's name) — plus the noisy answer,
its noise scale and 95% interval and every post-processed answer, streamed family by family
(2.6 million cells never become 2.6 million Python objects).

CSV is for people (:func:`write_csv`): noise scales and standard errors are rounded to
:data:`SCALE_DIGITS` significant digits and other fractional numbers (post-processed or
reconstructed answers) to :data:`ANSWER_DECIMALS` decimals, so 5.0000000000052935 reads 5;
Parquet keeps every float as computed, and the certificate (JSON) holds each exact scale.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tessera.data.counts import CountResult
from tessera.errors import TesseraError

if TYPE_CHECKING:
    from tessera.release.view import ReleaseView

NOT_PRIVATE_MARK = "NOT PRIVATE: seeded test randomness, never publish"
#: Significant digits of a noise scale or standard error in CSV (exact in the certificate).
SCALE_DIGITS = 6
#: Decimals of any other fractional number in CSV.
ANSWER_DECIMALS = 3
#: The columns rounded to :data:`SCALE_DIGITS` significant digits.
SCALE_COLUMNS = ("noise_scale", "std_error")


def significant(values: np.ndarray, digits: int = SCALE_DIGITS) -> np.ndarray:
    """``values`` rounded to ``digits`` significant digits, each the float nearest its short
    decimal (an integer divided by a power of ten is correctly rounded), so it prints short."""
    x = np.asarray(values, dtype=np.float64)
    out = x.copy()
    ok = np.isfinite(x) & (x != 0)
    shift = (digits - 1 - np.floor(np.log10(np.abs(x[ok])))).astype(np.int64)
    up, down = shift >= 0, shift < 0
    v = x[ok]
    r = np.empty_like(v)
    r[up] = np.round(v[up] * 10.0 ** shift[up]) / 10.0 ** shift[up]
    r[down] = np.round(v[down] / 10.0 ** -shift[down]) * 10.0 ** -shift[down]
    out[ok] = r
    return out


def for_people(name: str, values: np.ndarray) -> np.ndarray:
    """A float column as CSV shows it (module docstring); other columns unchanged."""
    if name in SCALE_COLUMNS:
        return significant(values)
    return np.round(values, ANSWER_DECIMALS)


def long_batches(release: ReleaseView) -> Iterator[pa.RecordBatch]:
    """The long table a batch at a time: family, cell, answer, noise_scale, ci95_low,
    ci95_high, then one column per post-processing step (answers withheld: null)."""
    if release.strategy is not None:
        yield from _reconstructed_batches(release)
        return
    plan = release.plan
    labels = CountResult(plan.workload, release.noisy, 0, 0, ())
    start = 0
    for batch in labels.long_batches():
        n = batch.num_rows
        rows = slice(start, start + n)
        released = plan.halfwidths[rows] >= 0
        noisy = release.noisy[rows]
        hw = np.where(released, plan.halfwidths[rows], 0)
        cols = [batch.column(0), batch.column(1),
                pa.array(noisy, mask=~released), pa.array(plan.scales[rows]),
                pa.array(noisy - hw, mask=~released), pa.array(noisy + hw, mask=~released)]
        names = ["family", "cell", "answer", "noise_scale", "ci95_low", "ci95_high"]
        for step, values in release.postprocessed.items():
            cols.append(pa.array(values[rows]))
            names.append(step)
        yield pa.record_batch(cols, names=names)
        start += n


def _reconstructed_batches(release: ReleaseView) -> Iterator[pa.RecordBatch]:
    """W's answers reconstructed from a strategy: family, cell, answer, std_error, ci95_low,
    ci95_high (normal approximation), then the post-processing steps."""
    rec = release.strategy
    assert rec is not None
    labels = CountResult(rec.workload, np.zeros(rec.workload.n_queries, dtype=np.int64), 0, 0, ())
    start = 0
    for batch in labels.long_batches():
        rows = slice(start, start + batch.num_rows)
        ans, hw = rec.answers[rows], rec.halfwidths[rows]
        cols = [batch.column(0), batch.column(1), pa.array(ans),
                pa.array(np.sqrt(rec.variances[rows])), pa.array(ans - hw), pa.array(ans + hw)]
        names = ["family", "cell", "answer", "std_error", "ci95_low", "ci95_high"]
        for step, values in release.postprocessed.items():
            cols.append(pa.array(values[rows]))
            names.append(step)
        yield pa.record_batch(cols, names=names)
        start += batch.num_rows


def _metadata(release: ReleaseView) -> dict[bytes, bytes]:
    meta = {b"tessera.mechanism": release.mechanism.describe().encode(),
            b"tessera.private": b"true" if release.private else b"false"}
    if not release.private:
        meta[b"tessera.warning"] = NOT_PRIVATE_MARK.encode()
    return meta


def write_release(release: ReleaseView, path: Path) -> Path:
    """``.csv`` (:func:`write_csv`: a ``#`` comment line first when not private) or
    ``.parquet`` (the mark and the mechanism in the file's metadata; floats as computed)."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise TesseraError(f"cannot write answers as {suffix or 'a file without suffix'}",
                           where=str(path), hint="use .csv or .parquet")
    if suffix == ".csv":
        with path.open("wb") as sink:
            write_csv(release, sink)
        return path
    import pyarrow.parquet as pq

    if not release.workload.is_structured:
        table = pa.Table.from_pandas(release.to_frame(), preserve_index=False)
        pq.write_table(table.replace_schema_metadata(_metadata(release)), path)
        return path
    batches = long_batches(release)
    first = next(batches)
    schema = first.schema.with_metadata(_metadata(release))
    with pq.ParquetWriter(path, schema, use_dictionary=["family"]) as out:
        out.write_batch(first)
        for batch in batches:
            out.write_batch(batch)
    return path


def write_csv(release: ReleaseView, sink: IO[bytes]) -> None:
    """The answers as CSV for people (rounded: module docstring) to a binary stream — a file,
    or stdout — after a ``#`` NOT PRIVATE line when the noise was seeded."""
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv

    if not release.private:
        sink.write(f"# {NOT_PRIVATE_MARK}\n".encode())
    if not release.workload.is_structured:
        frame = release.to_frame()
        for name in frame.columns:
            if frame[name].dtype.kind == "f":
                frame[name] = for_people(name, frame[name].to_numpy())
        if release.workload.range_families is not None:  # (10⁵–10⁶ rows: Arrow's writer)
            pa_csv.write_csv(pa.Table.from_pandas(frame, preserve_index=False), sink,
                             pa_csv.WriteOptions(quoting_style="needed"))
            return
        sink.write(frame.to_csv(index=False, lineterminator="\n").encode())
        return

    def rounded(batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = []
        for name, col in zip(batch.schema.names, batch.columns):
            if pa.types.is_floating(col.type):
                values = for_people(name, col.to_numpy(zero_copy_only=False))
                col = pa.array(values, mask=pc.is_null(col).to_numpy(zero_copy_only=False))
            cols.append(col)
        return pa.record_batch(cols, names=batch.schema.names)

    batches = long_batches(release)
    first = rounded(next(batches))
    with pa_csv.CSVWriter(sink, first.schema) as out:
        out.write_batch(first)
        for batch in batches:
            out.write_batch(rounded(batch))
