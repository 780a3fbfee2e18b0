"""How close synthetic rows are to the real data on a workload (NOT PRIVATE: it reads the data).

Both tables are counted by :func:`tessera.count` (the synthetic rows as a DataFrame in the
schema's values; a bin label such as ``[10, 50)`` stands for a number inside its bin), and each
count is turned into a fraction of its own table's rows, so tables of different sizes compare:

* per query: the error |real fraction − synthetic fraction|; the maximum and the mean;
* per structured family (``workload.partitions``: marginals, cube cells, hierarchy levels): the
  L1 distance Σ_cells |real − synthetic| between the two normalised marginals, and its average
  over the families — the benchmark metric of the issue (for a family whose cells cover the
  domain the fractions sum to 1, so this is the L1 distance of the normalised marginals).

The errors are computed from the exact answers on the sensitive data: they are for testing and
benchmarking, not for publication (:attr:`Evaluation.private` is always False).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.data.counts import NOT_PRIVATE, count
from tessera.data.table import CsvOptions, ExtraColumns, OnInvalid
from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.errors import DataError, TesseraError
from tessera.schema.domain import Binned, Domain
from tessera.software import require
from tessera.synth.defaults import default_workload
from tessera.workload.workload import Workload

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Evaluation", "evaluate", "read_synthetic", "synthetic_frame"]

#: Per-query errors drawn in the plot (the sorted curve is subsampled beyond this).
PLOT_POINTS = 2000
#: Families drawn as bars (the worst ones beyond this; the panel's title says so).
PLOT_FAMILIES = 40
#: Figure height per family bar, inches: a 7-point label is about 0.1 in tall, so bars 0.2 in
#: apart keep a gap between neighbouring labels.
BAR_INCHES = 0.2
#: Longest family label drawn, in characters.
LABEL_CHARS = 48
#: What needs matplotlib (the ``plot`` extra) here, as its error says.
PLOT_PURPOSE = "plotting the errors (tessera evaluate --plot)"


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Real and synthetic answers of a workload as fractions of each table's rows (expanded
    order: predicate queries, then every family's cells), and the errors between them."""

    workload: Workload
    real: npt.NDArray[np.float64]
    synthetic: npt.NDArray[np.float64]
    real_rows: int
    synthetic_rows: int
    notes: tuple[str, ...] = ()  # which default workload was used, when none was given

    private = False

    @property
    def errors(self) -> npt.NDArray[np.float64]:
        """|real − synthetic| per query."""
        return np.abs(self.real - self.synthetic)

    @property
    def max_error(self) -> float:
        return float(self.errors.max()) if self.errors.size else 0.0

    @property
    def mean_error(self) -> float:
        return math.fsum(self.errors.tolist()) / self.errors.size if self.errors.size else 0.0

    @property
    def family_l1(self) -> dict[str, float]:
        """Family name → Σ_cells |real − synthetic| (the L1 distance of the normalised
        marginals)."""
        e = self.errors
        return {p.name: math.fsum(e[cells].tolist()) for p, cells in self.workload.family_slices()}

    @property
    def mean_family_l1(self) -> float | None:
        """The average of :attr:`family_l1` (None without families)."""
        values = list(self.family_l1.values())
        return math.fsum(values) / len(values) if values else None

    def per_query(self) -> pd.DataFrame:
        """``query, real, synthetic, error`` in expanded order (a family's cell named
        ``family[attr=value, …]``)."""
        return pd.DataFrame({"query": list(self.workload.all_names()), "real": self.real,
                             "synthetic": self.synthetic, "error": self.errors})

    def worst(self, k: int = 20) -> pd.DataFrame:
        """The ``k`` queries with the largest errors, worst first."""
        k = min(int(k), self.errors.size)
        idx = np.argsort(-self.errors, kind="stable")[:k]
        return pd.DataFrame({"query": [self.workload.name_of(int(i)) for i in idx],
                             "real": self.real[idx], "synthetic": self.synthetic[idx],
                             "error": self.errors[idx]})

    def to_dict(self, per_query: bool = True) -> dict[str, Any]:
        """JSON-ready; ``per_query=False`` leaves out the (possibly long) per-query list."""
        out: dict[str, Any] = {
            "note": NOT_PRIVATE + " (errors against the real data)",
            "real_rows": self.real_rows, "synthetic_rows": self.synthetic_rows,
            "queries": int(self.errors.size),
            "max_error": self.max_error, "mean_error": self.mean_error,
            "families": self.family_l1, "mean_family_l1": self.mean_family_l1,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if per_query:
            out["per_query"] = [
                {"query": name, "real": float(r), "synthetic": float(s), "error": float(e)}
                for name, r, s, e in zip(self.workload.all_names(), self.real, self.synthetic,
                                         self.errors)]
        return out

    def describe(self) -> str:
        lines = [f"{NOT_PRIVATE} (errors against the real data)",
                 f"{self.errors.size:,} queries; real rows {self.real_rows:,}, synthetic rows "
                 f"{self.synthetic_rows:,}",
                 f"max error {self.max_error:.6g}, mean error {self.mean_error:.6g} "
                 "(fractions of the rows)", *self.notes]
        if self.workload.partitions:
            lines.append(f"mean L1 over {len(self.workload.partitions)} families: "
                         f"{self.mean_family_l1:.6g}")
        return "\n".join(lines)

    def figure(self) -> Figure:
        """The plot's matplotlib figure (Agg): the per-query errors sorted, and one bar per
        family (its L1 distance) when the workload has families — the worst
        :data:`PLOT_FAMILIES` of them, the title saying how many of how many; the figure is
        :data:`BAR_INCHES` tall per bar so their labels never overlap, and a label longer than
        :data:`LABEL_CHARS` is cut with "…". NOT PRIVATE in red above the panels. matplotlib
        is the optional ``plot`` extra: without it, one line naming the extra
        (:func:`tessera.software.require`)."""
        figure = require("matplotlib.figure", "plot", PLOT_PURPOSE)
        agg = require("matplotlib.backends.backend_agg", "plot", PLOT_PURPOSE)

        families = self.family_l1
        panels = 2 if families else 1
        items = sorted(families.items(), key=lambda kv: -kv[1])[:PLOT_FAMILIES]
        height = max(4.4, 1.6 + BAR_INCHES * len(items))
        fig = figure.Figure(figsize=(6.4 * panels, height), dpi=100)
        agg.FigureCanvasAgg(fig)
        fig.suptitle(f"{NOT_PRIVATE} (errors against the real data)", color="#c00000",
                     fontweight="bold", fontsize=9)
        ax = fig.add_subplot(1, panels, 1)
        errors = np.sort(self.errors)[::-1]
        x = np.arange(1, errors.size + 1)
        if errors.size > PLOT_POINTS:
            keep = np.unique(np.linspace(0, errors.size - 1, PLOT_POINTS).astype(np.int64))
            x, errors = x[keep], errors[keep]
        ax.plot(x, errors, lw=1.5, marker="." if errors.size <= 100 else None)
        ax.set_xlabel("query (sorted by error)")
        ax.set_ylabel("|real − synthetic| (fraction of rows)")
        ax.set_title(f"max {self.max_error:.3g}, mean {self.mean_error:.3g}")
        ax.grid(alpha=0.3)
        if families:
            bx = fig.add_subplot(1, panels, 2)
            labels = [short_label(name).replace("$", r"\$") for name, _ in items]
            bx.barh(np.arange(len(items)), [v for _, v in items])
            bx.set_yticks(np.arange(len(items)), labels, fontsize=7)
            bx.set_ylim(len(items) - 0.5, -0.5)  # worst on top, no empty margin rows
            bx.set_xlabel("L1 distance of the normalised marginals")
            shown = ("" if len(items) == len(families)
                     else f"\nthe worst {len(items)} of {len(families)} families shown")
            bx.set_title(f"mean L1 {self.mean_family_l1:.3g} over {len(families)} families"
                         + shown, fontsize=10)
        fig.tight_layout()
        return fig

    def plot(self, path: str | Path) -> Path:
        """:meth:`figure` as a PNG. The errors come from exact answers on the real data: the
        figure says NOT PRIVATE in red above the panels, and the PNG's ``Description`` text
        chunk says it too."""
        p = Path(path)
        self.figure().savefig(
            p, format="png",
            metadata={"Description": f"{NOT_PRIVATE} (errors against the real data)"})
        return p


def short_label(name: str, limit: int | None = None) -> str:
    """``name`` cut to ``limit`` characters (default :data:`LABEL_CHARS`) with "…" at the end,
    so one long family name cannot squeeze the panels."""
    limit = LABEL_CHARS if limit is None else limit
    return name if len(name) <= limit else name[: limit - 1] + "…"


def read_synthetic(path: str | Path) -> pd.DataFrame:
    """Synthetic rows written by :meth:`FittedSynthesizer.write` (or any CSV/Parquet in the
    schema's values): a ``#`` first line (the NOT PRIVATE mark) is skipped; CSV values are read
    as text and left to the schema to interpret."""
    p = Path(path)
    if not p.is_file():
        raise DataError("no such file", where=str(p))
    if p.suffix.lower() == ".parquet":
        return pd.read_parquet(p)
    with p.open() as f:
        skip = 1 if f.readline().startswith("#") else 0
    return pd.read_csv(p, skiprows=skip, dtype=str, keep_default_na=False, na_values=[""])


def synthetic_frame(synthetic: Any, domain: Domain) -> pd.DataFrame:
    """Synthetic rows as a DataFrame :func:`tessera.count` reads: from a fitted synthesizer
    (its rows), a DataFrame, a CSV/Parquet path, or rows of codes; bin labels become a number
    inside their bin."""
    if isinstance(synthetic, pd.DataFrame):
        frame = synthetic
    elif hasattr(synthetic, "sample") and hasattr(synthetic, "rows"):  # FittedSynthesizer
        frame = synthetic.sample()
    elif isinstance(synthetic, (str, Path)):
        frame = read_synthetic(synthetic)
    elif isinstance(synthetic, np.ndarray):
        from tessera.synth.fitted import decode_rows

        frame = decode_rows(domain, synthetic)
    else:
        raise TesseraError(f"cannot read synthetic rows from {type(synthetic).__name__}",
                           hint="a fitted Synthesizer, a DataFrame, a CSV/Parquet path or codes")
    frame = frame.copy()
    for a in domain:
        if isinstance(a, Binned) and a.name in frame.columns:
            frame[a.name] = _bin_numbers(a, frame[a.name])
    return frame


def _bin_numbers(a: Binned, column: pd.Series) -> pd.Series:
    """Bin labels replaced by a number strictly inside the bin (numbers and nulls kept)."""
    inside = {}
    for code in range(a.n_values):
        lo, hi, _, _ = a.bounds(code)
        if math.isinf(lo):
            v = hi - 1.0
        elif math.isinf(hi):
            v = lo + 1.0
        else:
            v = lo + (hi - lo) / 2.0
        inside[a.value(code)] = v
    values = [inside.get(x, x) if isinstance(x, str) else x for x in column]
    return pd.Series(pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
        dtype=np.float64), index=column.index)


def evaluate(
    data: Any,
    synthetic: Any,
    workload: Workload | Domain,
    *,
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
    on_invalid: OnInvalid = "error",
    extra_columns: ExtraColumns = "error",
) -> Evaluation:
    """Errors of ``synthetic`` against ``data`` on ``workload`` (module docs). ``data`` is read
    as :func:`tessera.count` reads it (``csv``, ``table``, ``on_invalid``, ``extra_columns``
    apply to it); ``synthetic`` as :func:`synthetic_frame` reads it. Given a schema
    (:class:`~tessera.schema.domain.Domain`) instead of a workload, the errors are taken on the
    workload :class:`tessera.Synthesizer` fits when given none
    (:func:`tessera.synth.defaults.default_workload`: every 2-way marginal when their exact
    counts fit the engine's memory limit, else every 1-way marginal); :attr:`Evaluation.notes`
    says which."""
    notes: tuple[str, ...] = ()
    if isinstance(workload, Domain):
        chosen = default_workload(workload, lambda _: None, DEFAULT_MEMORY_LIMIT)
        workload, notes = chosen.workload, (chosen.note.replace(
            "(no workload was given", "(no workload was given to the evaluation"),)
    real = count(data, workload, csv=csv, table=table, on_invalid=on_invalid,
                 extra_columns=extra_columns)
    synth = count(synthetic_frame(synthetic, workload.domain), workload)
    if real.n_rows == 0 or synth.n_rows == 0:
        raise DataError("a table has no rows: nothing to compare")
    return Evaluation(workload, real.answers / float(real.n_rows),
                      synth.answers / float(synth.n_rows), real.n_rows, synth.n_rows, notes)
