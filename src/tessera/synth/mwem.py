"""MWEM on an explicit histogram: the baseline that validates IPMWU (docs/theory.md §5).

The same rounds as :func:`tessera.synth.ipmwu.ipmwu` (the same private steps, budget split,
parameters and records), but h_t is a vector of probabilities over *every* point of the domain,
updated multiplicatively, h_{t+1}(x) ∝ h_t(x) · exp(Δθ_t f_t(x)), with ⟨f, h⟩ a dot product and
samples drawn by ``Generator.choice`` over the cells. It is exponential in d, so it is refused
beyond :data:`MAX_CELLS` = 2^20 cells (d ≤ 20 binary attributes, or small product domains) and
when the |F| × cells table of query values exceeds ``memory_limit``.

Its purpose is to check the engine: with exact expectations and the same selections and noise
(the same seeded :class:`~tessera.mechanisms.NoiseSource`, or a replayed
:class:`~tessera.synth.rounds.Transcript`) the trajectory of IPMWU must be that of MWEM, and with
the sampler it must converge to it as m grows (``tests/synth``). Cells are enumerated in
row-major order of the domain's codes (the last attribute fastest), like ``np.ndindex``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import logsumexp

from tessera.data.table import ExtraColumns, OnInvalid
from tessera.engine.factors import Function
from tessera.errors import QueryError, ResourceError
from tessera.mechanisms import NoiseSource
from tessera.privacy import Neighbours
from tessera.schema.domain import Domain
from tessera.synth.parameters import Expectations, Update
from tessera.synth.progress import Reporter
from tessera.synth.rounds import (
    Progress,
    RunRecord,
    Timings,
    Transcript,
    drive,
    finish,
    prepare,
    sample_average,
)
from tessera.synth.sensitive import Evaluator, query_functions
from tessera.workload.workload import Workload

__all__ = ["MAX_CELLS", "MWEMResult", "cells", "mwem"]

#: The largest histogram MWEM builds (2^20 cells: d = 20 binary attributes).
MAX_CELLS = 1 << 20
#: Default bound on the |F| × cells table of query values (bytes, one per entry).
DEFAULT_TABLE_LIMIT = 1 << 30
_BLOCK = 1 << 22

FloatArray = npt.NDArray[np.float64]


def cells(domain: Domain, max_cells: int = MAX_CELLS) -> npt.NDArray[np.integer]:
    """Every point of ``domain`` as codes, row-major (shape (|𝔻|, len(domain))).

    Raises :class:`~tessera.errors.ResourceError` beyond ``max_cells`` points."""
    size = domain.size
    if size > max_cells:
        raise ResourceError(
            f"the domain has {size:,} points: the explicit histogram takes at most "
            f"{max_cells:,} (2^{int(math.log2(max_cells))})",
            hint="the ipmwu method (--method ipmwu) keeps the histogram implicit")
    sizes = domain.sizes
    dtype = np.int8 if max(sizes, default=1) <= 127 else np.int64
    grid = np.indices(sizes, dtype=dtype).reshape(len(sizes), -1).T
    return np.ascontiguousarray(grid)


class _Explicit:
    """h as explicit log-weights over the cells (−∞ where a constraint fails)."""

    def __init__(self, table: npt.NDArray[np.bool_], log_h: FloatArray) -> None:
        self.table = table
        self.log_h = log_h - logsumexp(log_h)

    @property
    def probabilities(self) -> FloatArray:
        return np.exp(self.log_h)

    def expectations(self) -> FloatArray:
        h = self.probabilities
        out = np.empty(self.table.shape[0])
        rows = max(1, _BLOCK // max(1, self.table.shape[1]))
        for lo in range(0, self.table.shape[0], rows):
            out[lo: lo + rows] = self.table[lo: lo + rows].astype(np.float64) @ h
        return out

    def sample_answers(self, m: int, rng: np.random.Generator,
                       which: npt.NDArray[np.int64] | None = None) -> FloatArray:
        chosen = rng.choice(self.log_h.size, size=m, p=self.probabilities)
        table = self.table if which is None else self.table[which]
        return table[:, chosen].sum(axis=1) / float(m)

    def updated(self, j: int, delta: float) -> _Explicit:
        return _Explicit(self.table, self.log_h + delta * self.table[j])


@dataclass(frozen=True, eq=False)
class MWEMResult:
    """Synthetic rows (codes), the run record, the average distribution over the cells and,
    with ``keep_histograms``, every round's h_t (row t = h_{t+1}, t = 0 … T)."""

    rows: npt.NDArray[np.integer]
    record: RunRecord
    domain: Domain
    names: tuple[str, ...]
    cells: npt.NDArray[np.integer]
    average: FloatArray
    histograms: FloatArray | None
    table: npt.NDArray[np.bool_]

    @property
    def private(self) -> bool:
        return self.record.private

    def average_answers(self) -> FloatArray:
        """⟨f, (1/T) Σ_t h_t⟩ for every query."""
        return _Explicit(self.table, np.log(self.average)).expectations()

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({a.name: a.decode(self.rows[:, i])
                             for i, a in enumerate(self.domain)})


def mwem(
    domain: Domain,
    queries: Sequence[Function] | Workload,
    data: Any = None,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    neighbours: Neighbours | str = Neighbours.SUBSTITUTE,
    rounds: int | None = None,
    step: float | None = None,
    sample_size: int | None = None,
    rows: int | None = None,
    expectations: Expectations = "exact",
    update: Update | None = None,
    total_fraction: float = 0.05,
    source: NoiseSource | None = None,
    rng: np.random.Generator | int | None = None,
    replay: Transcript | None = None,
    names: Sequence[str] | None = None,
    constraints: Sequence[Function] = (),
    keep_histograms: bool = False,
    max_cells: int = MAX_CELLS,
    memory_limit: int = DEFAULT_TABLE_LIMIT,
    on_invalid: OnInvalid = "error",
    extra_columns: ExtraColumns = "error",
    progress: Progress | None = None,
) -> MWEMResult:
    """The rounds of :func:`~tessera.synth.ipmwu.ipmwu` on an explicit histogram (same
    arguments, ``progress`` included; ``expectations`` defaults to ``"exact"``, the classic
    MWEM). ``keep_histograms`` stores every h_t (T + 1 vectors over the cells: for tests)."""
    report = Reporter.of(progress)
    report("setup", "start")
    t0 = time.perf_counter()
    functions, qnames = query_functions(domain, queries, names)
    grid = cells(domain, max_cells)
    need = len(functions) * grid.shape[0]
    if need > memory_limit:
        raise ResourceError(
            f"the table of {len(functions):,} queries over {grid.shape[0]:,} cells needs "
            f"{need:,} bytes, over the limit of {memory_limit:,}",
            hint="fewer queries, a smaller domain, or memory_limit=")
    table = Evaluator(domain, functions).matrix(grid)
    log_h = np.zeros(grid.shape[0])
    for c in constraints:
        log_h[~Evaluator(domain, [c]).matrix(grid)[0]] = -np.inf
    if not np.isfinite(log_h).any():
        raise QueryError("the constraints exclude every point of the domain")
    log_domain = float(logsumexp(log_h))
    setting, budget = prepare(
        functions=functions, domain=domain, queries=queries, data=data,
        log_domain_size=log_domain, epsilon=epsilon, rho=rho, neighbours=neighbours,
        rounds=rounds, step=step, sample_size=sample_size, rows=rows,
        expectations=expectations, update=update, total_fraction=total_fraction,
        source=source, rng=rng, replay=replay, on_invalid=on_invalid,
        extra_columns=extra_columns)
    setup = time.perf_counter() - t0
    T = setting.params.rounds
    report("setup", round=0, rounds=T, bound=False)
    average = np.zeros(grid.shape[0])
    kept: list[FloatArray] = []

    def observe(t: int, h: Any) -> None:
        p = h.probabilities
        np.add(average, p, out=average)
        if keep_histograms:
            kept.append(p)

    out = drive(_Explicit(table, log_h), setting, observe, report)
    if keep_histograms:
        kept.append(out.final.probabilities)  # type: ignore[attr-defined]
    average /= T
    t1 = time.perf_counter()
    gen = setting.rng

    def samplers() -> Iterator[Callable[[int], np.ndarray]]:
        # one sampler for the average itself: a row of (1/T) Σ h_t is a cell drawn from it
        yield lambda k: grid[gen.choice(grid.shape[0], size=k, p=average / average.sum())]

    report("sampling", "start", rows=setting.params.rows)
    synthetic = sample_average(setting.params.rows, 1, gen, samplers(), len(domain))
    report("sampling", rows=setting.params.rows)
    timings = Timings(setup, tuple(out.round_times), time.perf_counter() - t1)
    record = finish("MWEM (explicit histogram over the domain)", setting, out, budget, timings,
                    None)
    return MWEMResult(synthetic, record, domain, qnames, grid, average,
                      np.array(kept) if keep_histograms else None, table)
