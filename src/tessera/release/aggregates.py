"""Answer aggregate statements privately: COUNT, SUM, AVG with GROUP BY (docs/aggregates.md,
docs/theory.md §3.15).

The order is :func:`tessera.release.answering.answer`'s: **plan** from the public inputs
(:func:`~.aggregate_plan.aggregate_plan`; with a ledger, each measure summed in the unit of its
first charge to it), the data read and validated (and bounded per person) before any charge,
the **charge** (the release's linear queries, which the ledger cuts together with every
earlier release of linear queries into count pieces — each measure's grid the union of every
release's breakpoints — and re-solves: :meth:`~tessera.release.ledger.Ledger.charge_linear`),
then the exact sums, the **noise**
(discrete Laplace or Gaussian from OpenDP, on integer sums: every clamped value is an integer),
AVG as post-processing, and the files, all or none.

The exact linear queries are computed from the pieces' counts, f_q = Σ_c g_{q,c}·count(q ∧ x_a
= c), on the engine that reads the data (DuckDB or Spark, the person bounding included): a sum
of integer values clamped to [lo, hi] is that exactly. A **measure**'s sum (a data column
outside the schema) is summed by the engine itself, Σ u(x) over the kept rows of the group,
u(x) the clamped value in integer units of its resolution 10^e
(:data:`~tessera.data.validation.MEASURE_RULE`); the noise is added to that integer and the
answer published is 10^e times it (post-processing).

**AVG.** A = Ŝ/Ĉ with the noisy sum and count, clipped to [lo, hi] (post-processing); its 95%
interval is the delta method's, A ± 1.96·√(Var S + A²·Var C)/Ĉ (an approximation, not a
proven coverage: it assumes the count well above its noise). When Ĉ ≤ 0 the mean is
undefined: the answer is empty and the interval is [lo, hi], the range every mean of clamped
values lies in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.data.counts import count_encoded
from tessera.data.outputs import Delivery, Output, aborted_hint, check_outputs, settled, staged
from tessera.data.source import encode
from tessera.data.table import CsvOptions, ExtraColumns
from tessera.errors import DataError, TesseraError
from tessera.mechanisms import NoiseSource, discrete_gaussian, discrete_laplace
from tessera.mechanisms.record import MechanismRecord
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release.aggregate_plan import AggregatePlan, aggregate_plan, check_scales
from tessera.release.budget import DISCRETE_LAPLACE, Budget
from tessera.release.ledger import Charge, Ledger
from tessera.workload.aggregates import Aggregate, AggregateWorkload, LinearQuery
from tessera.workload.workload import Workload

#: z of the delta-method 95% interval of an average.
Z95 = 1.959963984540054
#: The published columns.
COLUMNS = ["statement", "group", "aggregate", "answer", "noise_scale", "ci95_low", "ci95_high"]


@dataclass(frozen=True, eq=False)
class AggregateRelease:
    """Noisy linear queries (``noisy``, integers) and the published rows (``frame``: one per
    statement, group and aggregate), the certificate and the ledger charge."""

    #: the direct plan, or a strategy plan (:class:`~.sum_strategy.SumStrategyPlan`: ``noisy``
    #: are then its measured queries' noisy answers)
    plan: Any
    noisy: npt.NDArray[np.int64]
    mechanism: MechanismRecord
    frame: pd.DataFrame
    certificate: dict[str, Any]
    charge: Charge | None = None

    @property
    def private(self) -> bool:
        return self.mechanism.private


def exact_linear(domain: Any, linear: Sequence[LinearQuery], table: Any) -> npt.NDArray[np.int64]:
    """f_q on the encoded table: Σ_c g_{q,c}·count(piece c) (counts: the query's count); a
    measure's sum Σ u(x) in units, summed by the engine (:meth:`measure_sums`). A table
    encoded to count people (its privacy ids kept): each person once per query, a sum of the
    persons' clamped totals (:func:`tessera.data.people_counts.person_linear`)."""
    if getattr(table, "person_ids", False):  # each person once per query (§3.14)
        from tessera.data.people_counts import person_linear

        return checked_sums(person_linear(table, linear))
    owner: list[int] = []
    values: list[int] = []
    queries: list[Any] = []
    out = [0] * len(linear)  # Python integers: no overflow
    summed = [i for i, lq in enumerate(linear) if lq.is_measure]
    if summed:
        from tessera.data.people_counts import code_condition

        requests = [(code_condition(domain, linear[i].query), linear[i].attribute,
                     linear[i].lo, linear[i].hi, linear[i].exponent) for i in summed]
        for i, v in zip(summed, table.measure_sums(requests)):
            out[i] = int(v)
    for i, lq in enumerate(linear):
        if lq.is_measure:
            continue
        for q, g in lq.pieces(domain):
            owner.append(i)
            values.append(g)
            queries.append(q)
    if queries:
        counts = count_encoded(table, Workload(domain, tuple(queries),
                                               tuple(f"p{j}" for j in range(len(queries))),
                                               (1.0,) * len(queries))).tolist()
    else:
        counts = []
    for i, g, n in zip(owner, values, counts):
        out[i] += g * int(n)
    return checked_sums(out)


def checked_sums(out: Sequence[int]) -> npt.NDArray[np.int64]:
    """The exact answers as int64, refused beyond 2^62 (the samplers' integer range)."""
    if any(abs(v) >= 2**62 for v in out):
        raise DataError("a sum exceeds 2^62 (the samplers' integer range)",
                        hint="narrow the CLAMP bounds")
    return np.array(out, dtype=np.int64)


def answer_aggregates(
    data: Any, workload: AggregateWorkload, budget: Budget, *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE, unit: PrivacyUnit = ONE_ROW,
    ledger: Ledger | str | Path | None = None, label: str | None = None,
    time_limit: float | None = 60.0, seed: int | None = None,
    csv: CsvOptions = CsvOptions(), table: str | None = None, on_invalid: str = "error",
    extra_columns: ExtraColumns = "error", output: str | Path | None = None,
    certificate: str | Path | None = None, consistency: bool = False,
    strategy: str = "direct",
) -> AggregateRelease:
    """Answer every aggregate of ``workload`` on ``data`` under ``budget`` (module docs).

    ``consistency``: add least-squares consistent answers where statements nest (a total and
    its GROUP BY; post-processing, no privacy cost: :mod:`.aggregate_consistency`).
    ``strategy``: ``direct`` (every linear query measured itself), ``auto`` (each summed
    quantity's queries through the counting strategy of least expected error, or directly) or
    a strategy forced for every family (:mod:`.sum_strategy`, docs/theory.md §3.15)."""
    from tessera.release.aggregate_certificate import build_aggregate_certificate
    from tessera.release.sum_strategy import (
        SumStrategyPlan,
        build_certificate,
        reconstruct,
        sum_strategy_plan,
    )

    outputs = check_outputs([Output.of(output, "answers", (".csv",)),
                             Output.of(certificate, "certificate", (".json",))])
    book = Ledger.open(ledger) if isinstance(ledger, (str, Path)) else ledger
    if book is not None:
        if (book.definition is not budget.calibration
                or book.neighbours is not Neighbours.parse(neighbours)):
            raise TesseraError("the ledger counts another definition or neighbour relation "
                               "than this release (nothing was charged)",
                               hint="use the ledger's definition and --neighbours")
        book.check_unit(unit)
        # every release charged to the ledger sums a measure in one unit (its first charge's):
        # fixed before planning, since the noise is calibrated in units
        workload = book.at_units(workload)
    if consistency and unit.counts_people:
        raise TesseraError(
            "--consistency treats a total as the sum of its groups, and counting people it is "
            "not (a person in two groups is one person in their union, and a clamped total is "
            "not the sum of clamped parts); nothing was charged",
            hint="drop --consistency with --count people (each group is measured directly)")
    source = NoiseSource.secure() if seed is None else NoiseSource.seeded(seed)
    splan: SumStrategyPlan | None = None
    if consistency and strategy not in ("auto", "direct"):
        raise TesseraError(f"--consistency cannot be used with --strategy {strategy} "
                           "(nothing was charged)",
                           hint="the strategy's least-squares answers are consistent within "
                                "each summed quantity; drop one of the options")
    if not consistency:  # (consistency works on direct measurements: auto is direct then)
        splan = sum_strategy_plan(workload, budget, neighbours=neighbours, unit=unit,
                                  strategy=strategy, time_limit=time_limit)
    plan: Any = splan if splan is not None else aggregate_plan(
        workload, budget, neighbours=neighbours, unit=unit, time_limit=time_limit)
    measured = plan.measured if splan is not None else plan.linear
    check_scales(plan)
    encoded = encode(data, workload.domain, on_invalid=on_invalid,  # type: ignore[arg-type]
                     csv=csv, table=table, unit=unit, extra_columns=extra_columns,
                     measures=tuple(workload.measures))
    if encoded.n_rows == 0 and plan.neighbours is Neighbours.SUBSTITUTE:
        raise DataError("the data has no rows: under substitute neighbours n is public "
                        "(nothing was charged)", hint="use add/remove neighbours")
    charge = None
    if book is not None:
        # the ledger keeps the linear queries and re-cuts every such release together on one
        # cost domain (each measure's grid the union of every release's breakpoints): cut
        # release by release, two sums of one attribute under different conditions would each
        # keep their own cells and the union bound could count a row twice (docs/theory.md
        # §3.15, "Measures across releases")
        charge = book.charge_linear(workload.domain, measured, plan.costs,
                                    label=label or "aggregates", mechanism=plan.mechanism,
                                    time_limit=60.0 if time_limit is None
                                    else max(time_limit, 1.0), unit=unit)
    delivery = Delivery(tuple(o.path for o in outputs))
    symbol = "ε" if budget.calibration is Definition.PURE else "ρ"
    with settled(book, charge, lambda: aborted_hint("release", charge, symbol, delivery)):
        exact = exact_linear(workload.domain, measured, encoded)
        del encoded
        sampler = (discrete_laplace.sample if plan.mechanism == DISCRETE_LAPLACE
                   else discrete_gaussian.sample)
        drawn = sampler(exact, plan.scales, source)
        del exact
        if splan is None:
            frame = answer_frame(plan, drawn.values, consistency)
            doc = build_aggregate_certificate(plan, drawn.mechanism, charge)
        else:
            rec = reconstruct(splan, drawn.values)
            frame = pd.DataFrame(_rows(splan, rec.answers, rec.variances, rec.halfwidths,
                                       rec.scales), columns=COLUMNS)
            doc = build_certificate(splan, drawn.mechanism, charge)
        frame.attrs["private"] = drawn.mechanism.private
        shown = None if charge is None else dataclasses.replace(charge, status="released")
        release = AggregateRelease(plan, drawn.values, drawn.mechanism, frame, doc, shown)
        _deliver(release, outputs, delivery)
    return release


def answer_frame(plan: AggregatePlan, noisy: npt.NDArray[np.int64],
                 consistency: bool = False) -> pd.DataFrame:
    """One row per statement, group and aggregate: answer, noise scale (empty for an AVG),
    95% interval (exact for counts and sums, the delta method's for an AVG). ``consistency``
    adds ``consistent``, ``consistent_ci95_low`` and ``consistent_ci95_high``: the
    least-squares consistent answers (:mod:`.aggregate_consistency`) with normal-approximation
    intervals."""
    var = plan.variances()
    frame = pd.DataFrame(_rows(plan, noisy.astype(np.float64), var, plan.halfwidths),
                         columns=["statement", "group", "aggregate", "answer", "noise_scale",
                                  "ci95_low", "ci95_high"])
    if consistency:
        from tessera.release.aggregate_consistency import consistent

        f, fvar, n_eq = consistent(plan.workload, plan.linear, noisy, var)
        more = pd.DataFrame(_rows(plan, f, fvar, None),
                            columns=["statement", "group", "aggregate", "answer",
                                     "noise_scale", "ci95_low", "ci95_high"])
        frame["consistent"] = more["answer"]
        frame["consistent_ci95_low"] = more["ci95_low"]
        frame["consistent_ci95_high"] = more["ci95_high"]
        frame.attrs["consistency_equalities"] = n_eq
    return frame


def _rows(plan: Any, values: npt.NDArray[np.float64], var: npt.NDArray[np.float64],
          halfwidths: npt.NDArray[np.int64] | None,
          scales: npt.NDArray[np.float64] | None = None) -> list[list[Any]]:
    """The published rows from linear answers ``values`` of variances ``var``: intervals from
    the exact ``halfwidths`` of the noise when given (≥ 0), else ± 1.96·√var (a reconstructed
    answer: no noise scale of its own). ``scales``: each linear query's noise scale (default
    the plan's)."""
    own = plan.scales if scales is None else scales
    rows: list[list[Any]] = []
    for i, head, agg, unit in published_rows(plan.workload, plan.linear):
        u = float(unit)
        if agg.kind == "avg":
            s, c = scaled(float(values[i]), unit), float(values[i + 1])
            assert agg.lo is not None and agg.hi is not None
            lo, hi = float(agg.lo * agg.unit), float(agg.hi * agg.unit)
            if c <= 0:  # no mean: the range every mean of clamped values lies in
                rows.append([*head, math.nan, math.nan, lo, hi])
            else:
                a = min(max(s / c, lo), hi)
                half = Z95 * math.sqrt(var[i] * u * u + a * a * var[i + 1]) / c
                rows.append([*head, a, math.nan, max(a - half, lo), min(a + half, hi)])
            continue
        v = scaled(float(values[i]), unit)
        exact = halfwidths is not None and halfwidths[i] >= 0
        if not exact:
            h = Z95 * math.sqrt(var[i]) * u
            low, high = v - h, v + h
        else:  # integers of units: the ends rounded once, as the answer
            assert halfwidths is not None
            k = float(halfwidths[i])
            low = scaled(float(values[i]) - k, unit)
            high = scaled(float(values[i]) + k, unit)
        rows.append([*head, v, float(own[i]) * u if exact else math.nan, low, high])
    return rows


def published_rows(workload: AggregateWorkload, linear: Sequence[LinearQuery]
                   ) -> Iterator[tuple[int, list[Any], Aggregate, Decimal]]:
    """The published rows of ``linear`` (a workload's linear queries, in order): for each
    statement, group and aggregate, (the index of its first linear query — an AVG's sum, its
    count at the next —, [statement, group, aggregate label], the aggregate, the unit its sum
    is counted in: 10^e for a measure's, 1 otherwise)."""
    i = 0
    while i < len(linear):
        lq = linear[i]
        st = workload.statements[lq.statement]
        agg = st.aggregates[lq.aggregate]
        # a measure's sum is in units of 10^e: the published numbers are 10^e times them
        yield (i, [st.name, st.key_label(workload.domain, lq.key), agg.label], agg,
               agg.unit if lq.role == "sum" else Decimal(1))
        i += 2 if agg.kind == "avg" else 1


def scaled(x: float, unit: Decimal) -> float:
    """x units of ``unit`` as a float, the integers rounded once (12345678 units of 10^-4 is
    1234.5678, not 1234.5678000000001)."""
    if unit == 1:
        return x
    if math.isfinite(x) and x.is_integer():
        return float(Decimal(int(x)) * unit)
    return x * float(unit)


def write_frame(release: AggregateRelease, target: Any) -> None:
    """The rows as CSV to a path or a text stream, after a ``#`` NOT PRIVATE line when the
    noise was seeded (as :func:`tessera.release.output.write_csv`)."""
    from tessera.release.output import NOT_PRIVATE_MARK

    if isinstance(target, (str, Path)):
        with open(target, "w", encoding="utf-8", newline="") as f:
            write_frame(release, f)
        return
    if not release.private:
        target.write(f"# {NOT_PRIVATE_MARK}\n")
    release.frame.to_csv(target, index=False)


def _deliver(release: AggregateRelease, outputs: Sequence[Output], delivery: Delivery) -> None:
    """Every requested file, all or none (:func:`tessera.data.outputs.staged`)."""
    import json

    delivery.step = "writing the files"
    with staged([o.path for o in outputs], delivery.placed) as temps:
        for o, tmp in zip(outputs, temps):
            if o.what == "answers":
                write_frame(release, tmp)
            else:
                Path(tmp).write_text(json.dumps(release.certificate, indent=2,
                                                ensure_ascii=False) + "\n", encoding="utf-8")
        delivery.step = "putting the files in place"
