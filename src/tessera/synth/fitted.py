"""A fitted synthesizer: its rows, its output distribution's exact answers, its files.

:class:`FittedSynthesizer` is what :meth:`tessera.synth.synthesizer.Synthesizer.fit` returns:
``.sample()`` draws rows (post-processing) and decodes them to the schema's values
(:func:`decode_rows`), ``.answers()`` gives ⟨q, h⟩ of the distribution they are drawn from,
``.write()`` saves them (a ``# NOT PRIVATE`` mark when seeded); its record and description are
:mod:`tessera.synth.record`'s.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.accounting.guarantee import Guarantee
from tessera.data.outputs import (
    Delivery,
    Output,
    OutputError,
    atomic,
    check_outputs,
    staged,
    write_text,
)
from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.engine.model import GibbsModel
from tessera.errors import QueryError, TesseraError
from tessera.privacy import ONE_ROW, Neighbours, PrivacyUnit
from tessera.schema.domain import Domain
from tessera.synth.adaptive_record import AdaptiveResult
from tessera.synth.charge import Target
from tessera.synth.ipmwu import IPMWUResult
from tessera.synth.mwem import MWEMResult
from tessera.synth.record import describe, run_record, spent
from tessera.synth.rounds import iter_thetas, sample_average
from tessera.synth.sensitive import Evaluator, query_functions
from tessera.workload.query import Query
from tessera.workload.workload import Workload

if TYPE_CHECKING:  # lp.py is imported only when the LP runs
    from tessera.synth.lp import LPSynthesis

__all__ = [
    "NOT_PRIVATE_MARK",
    "Configuration",
    "FittedSynthesizer",
    "class_share",
    "decode_rows",
    "ipmwu_answers",
    "lp_answers",
]

#: The first line of a CSV (and the Parquet metadata) of a seeded, NOT PRIVATE run.
NOT_PRIVATE_MARK = "NOT PRIVATE: seeded test randomness, never publish"


# -- the fitted model --------------------------------------------------------------------------


def decode_rows(domain: Domain, codes: npt.ArrayLike) -> pd.DataFrame:
    """Rows of codes as the schema's own values: categories, integers, bin labels, booleans
    (``None`` for a missing value)."""
    codes = np.asarray(codes)
    columns = {}
    for i, a in enumerate(domain):
        values = a.decode(codes[:, i])
        columns[a.name] = pd.Series(values, dtype=object if None in values else None)
    return pd.DataFrame(columns, index=pd.RangeIndex(codes.shape[0]))


class Configuration(Protocol):
    """What a fitted result keeps of its :class:`tessera.synth.synthesizer.Synthesizer` (which
    imports this module): the method and its options."""

    method: str
    options: tuple[tuple[str, Any], ...]

    @property
    def settings(self) -> dict[str, Any]: ...


@dataclass(frozen=True, eq=False)
class FittedSynthesizer:
    """A fitted synthesizer: the run's rows, its output distribution and its record.

    ``result`` is the method's own result (:class:`~tessera.synth.ipmwu.IPMWUResult`,
    :class:`~tessera.synth.mwem.MWEMResult` or :class:`~tessera.synth.lp.LPSynthesis`);
    ``charge`` the ledger's record of the charge (None without a ledger)."""

    synthesizer: Configuration
    workload: Workload
    result: AdaptiveResult | IPMWUResult | MWEMResult | LPSynthesis
    target: Target | None
    neighbours: Neighbours
    charge: Any = None
    seed: int | None = None
    notes: tuple[str, ...] = ()  # what the run did that the user did not ask for
    #: whose presence the run protects: one row, or one person of at most K rows
    unit: PrivacyUnit = ONE_ROW

    @property
    def method(self) -> str:
        return self.synthesizer.method

    @property
    def domain(self) -> Domain:
        return self.workload.domain

    @property
    def rows(self) -> npt.NDArray[np.integer]:
        """The rows the run drew, as codes (shape (rows, attributes))."""
        return self.result.rows

    @property
    def private(self) -> bool:
        """False when the privacy randomness was seeded (then NOT PRIVATE). For ``lp`` that is
        the release's: a seed of the LP's own sampling is post-processing."""
        if self.method == "lp":
            return bool(self.result.private)
        return bool(self.result.private) and self.seed is None

    @property
    def record(self) -> Any:
        """The method's record: a :class:`~tessera.synth.rounds.RunRecord` (ipmwu, mwem) or the
        LP's JSON-ready dict."""
        return self.result.record() if self.method == "lp" else self.result.record

    # -- rows ---------------------------------------------------------------------------------
    def sample_codes(self, n: int | None = None,
                     rng: np.random.Generator | int | None = None) -> npt.NDArray[np.integer]:
        """``n`` fresh rows (codes) from the output distribution — the average of the round
        distributions (ipmwu, mwem) or the LP's histogram — or the run's own rows (n None).
        Sampling is post-processing: no privacy cost."""
        if n is None:
            return self.rows
        if isinstance(n, bool) or int(n) != n or n < 0:
            raise TesseraError(f"n must be an integer ≥ 0, got {n!r}")
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        res = self.result
        if isinstance(res, AdaptiveResult):
            return res.sample(int(n), gen)
        if isinstance(res, IPMWUResult):
            r = res.record
            model = res.model

            def samplers() -> Iterator[Callable[[int], np.ndarray]]:
                for theta in iter_thetas(r.transcript.selections, r.theta_steps, len(res.names)):
                    yield lambda k, theta=theta: model.with_theta(theta).sample(k, gen)

            return sample_average(int(n), r.parameters.rounds, gen, samplers(), len(self.domain))
        if isinstance(res, MWEMResult):
            p = res.average / res.average.sum()
            return res.cells[gen.choice(res.cells.shape[0], size=int(n), p=p)]
        return res.solution.sample(int(n), gen)

    def sample(self, n: int | None = None,
               rng: np.random.Generator | int | None = None) -> pd.DataFrame:
        """Rows in the schema's values (:func:`decode_rows`): the run's own rows (n None) or
        ``n`` fresh ones (:meth:`sample_codes`). ``attrs['private']`` says whether they are."""
        frame = decode_rows(self.domain, self.sample_codes(n, rng))
        frame.attrs["private"] = self.private
        frame.attrs["method"] = self.method
        return frame

    # -- the fitted distribution --------------------------------------------------------------
    def answers(self, workload: Workload | None = None, *,
                memory_limit: int | None = None) -> npt.NDArray[np.float64]:
        """Exact answers ⟨q, h⟩ (fractions in [0, 1]) of the output distribution h the rows
        are drawn from, for the fitted workload (expanded order) or another one over the same
        schema. Post-processing: no privacy cost. ``memory_limit`` (bytes): the engine's
        memory guard for the passes that read them (adaptive: default
        :data:`~tessera.engine.decomposition.DEFAULT_MEMORY_LIMIT`; ipmwu: default the
        synthesizer's own); a read past it raises :class:`~tessera.errors.ResourceError`
        before it allocates."""
        w = self.workload if workload is None else workload
        if w.domain != self.domain:
            raise QueryError("the workload is over another schema than the fitted one")
        res = self.result
        same = w is self.workload or w == self.workload
        if isinstance(res, AdaptiveResult):
            return res.answers(w, memory_limit=DEFAULT_MEMORY_LIMIT if memory_limit is None
                               else memory_limit)
        if isinstance(res, IPMWUResult):
            settings = self.settings if memory_limit is None else \
                self.settings | {"memory_limit": memory_limit}
            return res.average_answers() if same else ipmwu_answers(res, w, settings)
        functions, _ = query_functions(self.domain, w)
        if isinstance(res, MWEMResult):
            if same:
                return res.average_answers()
            table = Evaluator(self.domain, functions).matrix(res.cells)
            return table.astype(np.float64) @ (res.average / res.average.sum())
        return lp_answers(res, functions)

    @property
    def settings(self) -> dict[str, Any]:
        return self.synthesizer.settings

    # -- records (tessera.synth.record) --------------------------------------------------------
    def spent(self) -> list[Guarantee]:
        """What the run provably spent (:func:`tessera.synth.record.spent`)."""
        return spent(self)

    def run_record(self) -> dict[str, Any]:
        """The JSON-ready run record (:func:`tessera.synth.record.run_record`)."""
        return run_record(self)

    def describe(self) -> str:
        """A few lines for a terminal (:func:`tessera.synth.record.describe`)."""
        return describe(self)

    def write(self, path: str | Path, n: int | None = None,
              rng: np.random.Generator | int | None = None) -> Path:
        """The rows (:meth:`sample`) as ``.csv`` (a ``# NOT PRIVATE`` first line when seeded) or
        ``.parquet`` (the privacy mark, the method and the run record in its metadata)."""
        (o,) = check_outputs([Output(Path(path), "synthetic rows", ROW_SUFFIXES)])
        with atomic(o.path) as tmp:
            self.write_rows(tmp, n, rng)
        return o.path

    def write_rows(self, p: Path, n: int | None = None,
                   rng: np.random.Generator | int | None = None) -> Path:
        """:meth:`write` without its checks and atomic rename (the caller's:
        :func:`write_outputs`)."""
        suffix = p.suffix.lower()
        frame = self.sample(n, rng)
        if suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            meta = {b"tessera.private": b"true" if self.private else b"false",
                    b"tessera.method": self.method.encode(),
                    b"tessera.record": json.dumps(self.run_record()).encode()}
            if not self.private:
                meta[b"tessera.warning"] = NOT_PRIVATE_MARK.encode()
            table = pa.Table.from_pandas(frame, preserve_index=False)
            pq.write_table(table.replace_schema_metadata(meta), p)
            return p
        with p.open("w", newline="") as f:
            if not self.private:
                f.write(f"# {NOT_PRIVATE_MARK}\n")
            frame.to_csv(f, index=False)
        return p

    def write_record(self, path: str | Path) -> Path:
        """:meth:`run_record` as indented JSON."""
        return write_text(path, json.dumps(self.run_record(), indent=1, ensure_ascii=False)
                          + "\n")


#: Suffixes :meth:`FittedSynthesizer.write` knows.
ROW_SUFFIXES = (".csv", ".parquet")


def synth_outputs(output: str | Path | None, record: str | Path | None) -> tuple[Output, ...]:
    """The requested files of a run (rows, record), checked writable now (before any charge:
    :func:`tessera.data.outputs.check_outputs`)."""
    return check_outputs([Output.of(output, "synthetic rows", ROW_SUFFIXES),
                          Output.of(record, "run record", (".json",))])


def write_outputs(fitted: FittedSynthesizer, outputs: tuple[Output, ...],
                  delivery: Delivery | None = None,
                  then: Callable[[FittedSynthesizer], None] | None = None) -> None:
    """The requested files of a fitted run and ``then`` (a caller's delivery), all or none:
    the files are renamed into place only once ``then`` returned
    (:func:`tessera.data.outputs.staged`); an OS error (a full disk) is one line naming the
    file. ``delivery`` records the step and the files put in place (what an abort says)."""
    delivery = Delivery() if delivery is None else delivery
    delivery.step = "writing the files"
    with staged([o.path for o in outputs], delivery.placed) as temps:
        for o, tmp in zip(outputs, temps):
            try:
                if o.what == "synthetic rows":
                    fitted.write_rows(tmp)
                else:
                    tmp.write_text(json.dumps(fitted.run_record(), indent=1,
                                              ensure_ascii=False) + "\n", encoding="utf-8")
            except OSError as e:
                raise OutputError(f"cannot write the {o.what}: {e.strerror or e}",
                                  where=str(o.path)) from None
        if then is not None:
            delivery.step = "in the deliver callback, before the files were put in place"
            then(fitted)
        delivery.step = "putting the files in place"


def ipmwu_answers(res: IPMWUResult, workload: Workload,
                   settings: dict[str, Any]) -> npt.NDArray[np.float64]:
    """⟨q, (1/T) Σ_t h_t⟩ for queries the run did not fit: one model over the fitted queries
    and the new ones, the new ones at θ = 0 (so every h_t is unchanged), one engine pass per
    round."""
    fitted = res.model.queries
    new, _ = query_functions(res.domain, workload)
    kw = {k: settings[k] for k in ("heuristic", "memory_limit") if k in settings}
    model = GibbsModel(res.domain, (*fitted, *new), constraints=settings.get("constraints", ()),
                       **kw)
    r = res.record
    total = np.zeros(len(new))
    k = len(fitted)
    for theta in iter_thetas(r.transcript.selections, r.theta_steps, k):
        full = np.concatenate([theta, np.zeros(len(new))])
        total += model.with_theta(full).expectations()[k:]
    return total / r.parameters.rounds


def lp_answers(res: LPSynthesis, functions: Any) -> npt.NDArray[np.float64]:
    """⟨q, h⟩ for the LP's histogram h, whose support points stand for products of value
    classes (a drawn row takes a uniform code in each class): for a conjunction of predicates,
    Σ_k h_k Π_predicates (share of the class's codes inside the predicate); for any other
    query the LP fitted (a clause, a BDD), Σ_k h_k f(x_k) (f is constant on the classes)."""
    sol = res.solution
    dom = sol.targets.domain
    support, weights = sol.support, sol.weights
    out = np.zeros(len(functions))
    share_cache: dict[tuple[int, tuple[tuple[int, int], ...]], npt.NDArray[np.float64]] = {}
    fitted = {id(g) for g in sol.targets.functions}
    for j, f in enumerate(functions):
        if not isinstance(f, Query):
            if id(f) not in fitted:
                raise QueryError("exact LP answers take predicate queries (conjunctions) and the "
                                 "queries the LP fitted",
                                 hint="count the sampled rows instead (tessera.synth.evaluate)")
            # a fitted query is constant on the value classes the support points stand for
            values = np.asarray(f.evaluate(dom, support), dtype=np.float64)
            out[j] = math.fsum((values * weights).tolist())
            continue
        prob = np.ones(len(weights))
        for pred in f.predicates:
            i = dom.index(pred.attribute)
            key = (i, pred.coverage.spans)
            share = share_cache.get(key)
            if share is None:
                share = class_share(dom, sol.classes, i, pred.coverage)
                share_cache[key] = share
            prob *= share[support[:, i]]
        out[j] = math.fsum((prob * weights).tolist())
    return out


def class_share(dom: Domain, classes: Any, i: int, coverage: Any) -> npt.NDArray[np.float64]:
    """For every code c of attribute i: the share of the codes of c's value class inside
    ``coverage`` (1 or 0 when the classes are the codes)."""
    size = dom.sizes[i]
    codes = np.arange(size)
    inside = np.asarray(coverage.contains_array(codes), dtype=np.float64)
    if classes is None or classes[i].n_classes == size:
        return inside
    vc = classes[i]
    cls = vc.class_of(codes)
    per_class = np.bincount(cls, weights=inside, minlength=vc.n_classes) / vc.n_codes
    return per_class[cls]
