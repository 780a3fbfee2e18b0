"""Writing a release's answers: CSV or Parquet, marked NOT PRIVATE when the noise was seeded.

Predicate workloads are written one row per query (:meth:`Release.to_frame`). Structured ones
are written as the *long* table of :mod:`tessera.data.counts` — ``family, cell`` (the predicate
queries first, with ``family`` empty and ``cell`` the query's name) — plus the noisy answer,
its noise scale and 95% interval and every post-processed answer, streamed family by family
(2.6 million cells never become 2.6 million Python objects).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tessera.data.counts import CountResult
from tessera.errors import TesseraError

if TYPE_CHECKING:
    from tessera.release.view import ReleaseView

NOT_PRIVATE_MARK = "NOT PRIVATE: seeded test randomness, never publish"


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
    """``.csv`` (a ``#`` comment line first when not private) or ``.parquet`` (the mark and the
    mechanism in the file's metadata)."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise TesseraError(f"cannot write answers as {suffix or 'a file without suffix'}",
                           where=str(path), hint="use .csv or .parquet")
    if release.workload.is_structured:
        return _write_long(release, path, suffix)
    frame = release.to_frame()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(table.replace_schema_metadata(_metadata(release)), path)
        return path
    with path.open("w", newline="") as f:
        if not release.private:
            f.write(f"# {NOT_PRIVATE_MARK}\n")
        frame.to_csv(f, index=False)
    return path


def _write_long(release: ReleaseView, path: Path, suffix: str) -> Path:
    batches = long_batches(release)
    first = next(batches)
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        schema = first.schema.with_metadata(_metadata(release))
        with pq.ParquetWriter(path, schema, use_dictionary=["family"]) as out:
            out.write_batch(first)
            for batch in batches:
                out.write_batch(batch)
        return path
    import pyarrow.csv as pa_csv

    with path.open("wb") as sink:
        if not release.private:
            sink.write(f"# {NOT_PRIVATE_MARK}\n".encode())
        with pa_csv.CSVWriter(sink, first.schema) as out:
            out.write_batch(first)
            for batch in batches:
                out.write_batch(batch)
    return path
