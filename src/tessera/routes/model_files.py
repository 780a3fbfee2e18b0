"""The files of ``tessera answer --estimate adaptive``: answers in ``tessera answer``'s layout, and
a certificate that ``tessera verify`` re-proves (docs/certificate.md; docs/theory.md §10.5).

**Answers** (:func:`write_answers`): the columns of a reconstructed ``tessera answer`` release —
``query`` (or ``family, cell`` for a structured workload, the long table of
:mod:`tessera.data.counts`), ``answer``, ``std_error``, ``ci95_low``, ``ci95_high`` — with the
three interval columns empty: model answers have no proven interval. CSV is rounded for people
as :func:`tessera.release.output.for_people` rounds, after a ``# NOT PRIVATE`` line when
seeded; Parquet keeps every float and says in its metadata what the answers are.

**Certificate** (:func:`model_certificate`): the adaptive run's own record
(:func:`tessera.synth.record.run_record`: budget, every mechanism that ran with its parameter,
sensitivity and cost, the proven spend, the ledger's charge) with one more section,
``answers``: what the answers are (N̂ · P_θ(q), model estimates), N̂, the number of queries,
and ``interval: null`` with the reason. It is sealed like any run record (SHA-256 of every other
field), so ``tessera verify`` — which re-proves a run record's spend from the schema and the
workload alone (:func:`tessera.synth.verify.verify_record`) — checks it, and any edit of the
``answers`` section breaks the digest.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np
import pyarrow as pa

from tessera.data.counts import CountResult
from tessera.data.outputs import Output, OutputError, check_outputs, staged
from tessera.release.output import NOT_PRIVATE_MARK, for_people
from tessera.synth.fitted import FittedSynthesizer
from tessera.synth.record import sealed
from tessera.workload.workload import Workload

__all__ = ["ESTIMATE", "NO_INTERVAL", "answer_batches", "model_certificate", "model_outputs",
           "write_answers", "write_answers_csv", "write_model_outputs"]

#: The ``answers.estimate`` of the certificate.
ESTIMATE = "adaptive model"
#: Suffixes of the answers and the certificate: ``tessera answer``'s
#: (``tessera.release.answering.ANSWER_SUFFIXES``, ``CERTIFICATE_SUFFIXES``). Not imported from
#: there: loading the submodule ``tessera.release.answering`` first would bind the package
#: attribute ``tessera.release.answering`` to the module, shadowing the lazily exported function
#: (``tessera.answer`` would then return a module).
ANSWER_SUFFIXES = (".csv", ".parquet")
CERTIFICATE_SUFFIXES = (".json",)
#: What the files say about intervals.
NO_INTERVAL = ("model estimates N̂·P_θ(q) of the adaptive synthesizer's fitted model: biased, "
               "no proven interval (std_error and ci95 are left empty)")
#: The columns of the answer files after the query's name (``tessera answer``'s, reconstructed).
COLUMNS = ("answer", "std_error", "ci95_low", "ci95_high")


class ModelRelease(Protocol):
    """What the files read of a :class:`tessera.routes.adaptive.ModelRelease` (which imports
    this module, so it is named by its fields here)."""

    workload: Workload
    answers: np.ndarray
    fitted: FittedSynthesizer
    certificate: dict[str, Any]

    @property
    def private(self) -> bool: ...


def model_outputs(output: str | Path | None, certificate: str | Path | None
                  ) -> tuple[Output, ...]:
    """The requested files (answers, certificate), checked writable now (before any charge)."""
    return check_outputs([Output.of(output, "answers", ANSWER_SUFFIXES),
                          Output.of(certificate, "certificate", CERTIFICATE_SUFFIXES)])


def model_certificate(fitted: FittedSynthesizer, answers: np.ndarray) -> dict[str, Any]:
    """The run record of ``fitted`` with its ``answers`` section, sealed (module docs)."""
    record = {k: v for k, v in fitted.run_record().items()
              if k not in ("record_version", "digest")}
    total = float(fitted.result.total)
    record["answers"] = {
        "route": "tessera answer --estimate adaptive",
        "estimate": ESTIMATE,
        "definition": "N̂ · P_θ(q) for every query q of the workload: exact answers of the "
                      "run's fitted maximum-entropy model (engine marginals), post-processing "
                      "of the mechanisms listed in steps",
        "total": total,
        "total_basis": ("noisy total of the one-way marginals (inverse-variance weighted)"
                        if fitted.neighbours is fitted.neighbours.ADD_REMOVE
                        or not fitted.unit.is_row
                        else "n (public under substitution)"),
        "queries": int(answers.size),
        "interval": None,
        "interval_note": "no proven interval: the model's estimates are biased",
    }
    return sealed(record)


def answer_batches(release: ModelRelease) -> Iterator[pa.RecordBatch]:
    """The answer table a batch at a time: ``query`` (predicate workloads) or ``family, cell``
    (structured ones, predicate queries first), then :data:`COLUMNS`."""
    w = release.workload
    empty = pa.nulls(0, pa.float64())
    if not w.is_structured:
        n = w.n_queries
        nulls = pa.nulls(n, pa.float64())
        yield pa.record_batch([pa.array(list(w.all_names()), pa.string()),
                               pa.array(release.answers), nulls, nulls, nulls],
                              names=["query", *COLUMNS])
        return
    labels = CountResult(w, np.zeros(w.n_queries, dtype=np.int64), 0, 0, ())
    start = 0
    for batch in labels.long_batches():
        rows = slice(start, start + batch.num_rows)
        nulls = pa.nulls(batch.num_rows, pa.float64()) if batch.num_rows else empty
        yield pa.record_batch([batch.column(0), batch.column(1),
                               pa.array(release.answers[rows]), nulls, nulls, nulls],
                              names=["family", "cell", *COLUMNS])
        start += batch.num_rows


def _metadata(release: ModelRelease) -> dict[bytes, bytes]:
    meta = {b"tessera.mechanism": release.fitted.result.record.algorithm.encode(),
            b"tessera.estimate": NO_INTERVAL.encode(),
            b"tessera.private": b"true" if release.private else b"false"}
    if not release.private:
        meta[b"tessera.warning"] = NOT_PRIVATE_MARK.encode()
    return meta


def write_answers(release: ModelRelease, path: Path) -> Path:
    """``.csv`` (:func:`write_answers_csv`) or ``.parquet`` (floats as computed; the privacy
    mark, the mechanism and what the answers are in the metadata)."""
    if path.suffix.lower() == ".csv":
        with path.open("wb") as sink:
            write_answers_csv(release, sink)
        return path
    import pyarrow.parquet as pq

    batches = answer_batches(release)
    first = next(batches)
    with pq.ParquetWriter(path, first.schema.with_metadata(_metadata(release))) as out:
        out.write_batch(first)
        for batch in batches:
            out.write_batch(batch)
    return path


def write_answers_csv(release: ModelRelease, sink: IO[bytes]) -> None:
    """The answers as CSV for people (rounded as ``tessera answer`` rounds) to a binary stream,
    after a ``#`` NOT PRIVATE line when seeded."""
    import pyarrow.csv as pa_csv

    if not release.private:
        sink.write(f"# {NOT_PRIVATE_MARK}\n".encode())

    def rounded(batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = [pa.array(for_people("answer", col.to_numpy()))
                if name == "answer" else col
                for name, col in zip(batch.schema.names, batch.columns)]
        return pa.record_batch(cols, names=batch.schema.names)

    batches = answer_batches(release)
    first = rounded(next(batches))
    with pa_csv.CSVWriter(sink, first.schema) as out:
        out.write_batch(first)
        for batch in batches:
            out.write_batch(rounded(batch))


def write_model_outputs(release: ModelRelease, outputs: Sequence[Output]) -> None:
    """Every requested file (answers, certificate), all or none (:func:`staged`); an OS error
    (a full disk) is one line naming the file."""
    if not outputs:
        return
    from tessera.release.certificate import write_certificate

    with staged([o.path for o in outputs]) as temps:
        for o, tmp in zip(outputs, temps):
            try:
                if o.what == "answers":
                    write_answers(release, tmp)
                else:
                    write_certificate(release.certificate, tmp)
            except OSError as e:
                raise OutputError(f"cannot write the {o.what}: {e.strerror or e}",
                                  where=str(o.path)) from None
