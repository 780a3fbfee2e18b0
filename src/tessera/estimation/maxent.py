"""The maximum-entropy fit of a Gibbs model to noisy measurements (docs/theory.md §5, "the
adaptive method"), run on the engine.

**Model.** Over measured scopes s_1 … s_k (sets of attributes, each with a dense table θ_s over
the product of its attributes' codes) and measured wide queries q_1 … q_l (scalar θ_q):

    P_θ(x) ∝ exp( Σ_s θ_s[x_s] + Σ_q θ_q q(x) ).

θ is one flat vector: the tables of the scopes in order (C order), then the query weights; the
marginals μ come back in the same layout (μ_s = P_θ(x_s), μ_q = P_θ(q(x) = 1)). Without wide
queries the engine's compiled junction tree (:func:`tessera.engine.junction.junction_tree`)
runs the passes; with them, the engine's :class:`~tessera.engine.GibbsModel`, whose features
are the cells of each scope and the queries themselves (its decomposition handles a wide query
through its own automaton). Both are exact and exponential only in the width.

**Fit.** Each measurement m is a noisy vector y_m of the counts of a group (a marginal over s_m,
or one query) with noise of standard deviation σ_m. With N the (public or privately estimated)
total, the fit minimises the Gaussian negative log-likelihood

    L(θ) = Σ_m ‖N μ_m(θ) − y_m‖² / (2σ_m²),

the objective of Private-PGM (McKenna, Sheldon, Miklau, "Graphical-model based estimation and
inference for differential privacy", ICML 2019, §4). L is convex in the marginals μ and its
minimiser over the marginal polytope of the measured scopes is attained by the
maximum-entropy member of the exponential family P_θ; the fit runs **entropic mirror descent**
in the natural parameters (their Algorithm 1): θ ← θ − α ∇_μ L(μ(θ)), with
∇_{μ_s} L = Σ_{m on s} (N/σ_m²)(N μ_s − y_m) (a measurement on a sub-scope u ⊂ s reaches s's
cells through the projection), and an Armijo line search on α (accept when
L(θ') ≤ L(θ) − ½ α ⟨∇L, μ − μ'⟩, then α ← 1.01 α; else α ← α/2). Gradients are exact (engine
marginals, no sampling). Warm start: the adaptive method keeps θ and α between rounds and gives
a new scope a zero table.

Everything here is post-processing of the noisy measurements: no sensitive value is read.

>>> import numpy as np
>>> from tessera.schema.domain import Domain
>>> dom = Domain.from_dict({"a": 2, "b": 2})
>>> model = ScopeModel(dom, [(0, 1)])
>>> y = np.array([40.0, 10.0, 10.0, 40.0])  # a noiseless 2×2 marginal of 100 rows
>>> res = fit(model, [GroupMeasurement((0, 1), y, 1.0)], 100.0, iterations=2000)
>>> np.round(model.project(res.marginals, (0, 1)) * 100, 3).tolist()
[40.0, 10.0, 10.0, 40.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.engine.factors import DENSE_MAX, Function
from tessera.engine.junction import JunctionTree, junction_tree
from tessera.engine.model import GibbsModel
from tessera.engine.threads import one_blas_thread
from tessera.errors import ResourceError
from tessera.estimation.rows import Method as RowMethod
from tessera.estimation.rows import rows_from_cliques
from tessera.schema.domain import Domain
from tessera.workload.families import Partition

__all__ = ["FitResult", "GaussianLoss", "GroupMeasurement", "ScopeModel",
           "added_query_groups", "added_query_probabilities", "cell_by_cell",
           "cell_by_cell_error", "fit", "gibbs_functions", "initial_step"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
Scope = tuple[int, ...]
#: One map per attribute of a scope: code → group (groups numbered 0 … g − 1).
Coarsening = tuple[tuple[int, ...], ...]


@dataclass(frozen=True, eq=False)
class GroupMeasurement:
    """A noisy vector ``y`` of the counts of one group: the marginal over ``scope`` (cells in
    row-major order of the scope's attributes, domain order) or, when ``query`` is given, the
    single count of that wide query; ``sd`` is the standard deviation of each entry's noise (one
    number, or one per entry: a sum of k entries of noise σ has σ√k).
    ``groups`` (one map per attribute of the scope, code → group): ``y`` counts the
    *coarsened* marginal, whose cells are the products of groups (row-major over the group
    numbers). :func:`fit` does not take such a measurement over the fine domain: the adaptive
    synthesizer fits it over group codes (:class:`tessera.synth.coarsening.CoarseSpace`)."""

    scope: Scope
    y: FloatArray
    sd: float | FloatArray
    query: int | None = None
    groups: Coarsening | None = None

    @property
    def key(self) -> Scope | int:
        """The group it measures: a scope or a query number."""
        return self.scope if self.query is None else self.query

    def __post_init__(self) -> None:
        if self.groups is None:
            return
        if len(self.groups) != len(self.scope):
            raise ValueError("a coarsening needs one map of codes to groups per attribute")
        if np.asarray(self.y).size != math.prod(max(g) + 1 for g in self.groups):
            raise ValueError("a coarsened measurement needs one count per product of groups")


class ScopeModel:
    """P_θ over measured scopes and wide queries (module docstring), on the engine.

    ``scopes`` (attribute indices, domain order) and ``queries`` ((number, function) pairs) fix
    the structure, compiled once; :meth:`marginals` takes a flat θ (:attr:`n_parameters`)."""

    def __init__(self, domain: Domain, scopes: Sequence[Scope],
                 queries: Sequence[tuple[int, Function]] = (),
                 *, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        self.domain = domain
        self.scopes = tuple(tuple(s) for s in scopes)
        self.queries = tuple(queries)
        sizes_of = domain.sizes  # once: a property that walks every attribute
        self.shapes = tuple(tuple(sizes_of[i] for i in s) for s in self.scopes)
        sizes = [math.prod(sh) for sh in self.shapes]
        self.offsets = tuple(int(x) for x in np.cumsum([0, *sizes]))
        self.query_offset = self.offsets[-1]
        self.query_position = {j: self.query_offset + k for k, (j, _) in enumerate(self.queries)}
        self.n_parameters = self.query_offset + len(self.queries)
        self._scope_sets = [frozenset(s) for s in self.scopes]
        self._with_attribute: dict[int, list[int]] = {}  # attribute -> scopes holding it
        for k, s in enumerate(self.scopes):
            for a in s:
                self._with_attribute.setdefault(a, []).append(k)
        self._containers: dict[Scope, int | None] = {}
        self._jt: JunctionTree | None = None
        self._gibbs: GibbsModel | None = None
        if not self.queries:
            self._jt = junction_tree(domain.sizes, self.scopes, memory_limit=memory_limit)
        else:
            self._gibbs = GibbsModel(domain, gibbs_functions(domain, self.scopes, self.queries),
                                     memory_limit=memory_limit, compile_guard=True)

    @property
    def width(self) -> int:
        return self._jt.width if self._jt is not None else self._gibbs.width  # type: ignore

    def zero(self) -> FloatArray:
        return np.zeros(self.n_parameters)

    def marginals(self, theta: FloatArray) -> FloatArray:
        """μ in θ's layout: every scope's table (each sums to 1), then P[q = 1] per query."""
        if self._jt is not None:
            return self._jt.infer(theta)[1]
        assert self._gibbs is not None
        return self._gibbs.with_theta(theta).expectations()

    def container(self, scope: Scope) -> int | None:
        """The smallest model scope containing ``scope`` (its position), or None."""
        key = tuple(scope)
        if key not in self._containers:
            want = frozenset(key)
            best = None
            # a container holds every attribute of ``scope``: only the scopes holding its
            # first one are tried (in order, so ties go to the first as before)
            pool = self._with_attribute.get(key[0], []) if key else range(len(self.scopes))
            for k in pool:
                s = self._scope_sets[k]
                if want <= s and (best is None or len(s) < len(self._scope_sets[best])):
                    best = k
            self._containers[key] = best
        return self._containers[key]

    def project(self, mu: FloatArray, scope: Scope) -> FloatArray | None:
        """P(x_scope) (flat, row-major, domain order) from μ when ``scope`` lies in a model
        scope; None otherwise."""
        k = self.container(scope)
        if k is None:
            return None
        table = mu[self.offsets[k]: self.offsets[k + 1]].reshape(self.shapes[k])
        axes = tuple(i for i, a in enumerate(self.scopes[k]) if a not in scope)
        return (table.sum(axis=axes) if axes else table).ravel()

    def joint(self, theta: FloatArray, limit: int) -> FloatArray | None:
        """P_θ over the whole domain (shape: the domain's sizes) when it has at most ``limit``
        points and no wide query: exp(Σ_s θ_s[x_s]) normalised, each table broadcast along the
        attributes outside its scope (scopes are in domain order). None otherwise."""
        sizes = tuple(int(v) for v in self.domain.sizes)
        if self.queries or math.prod(sizes) > limit:
            return None
        log_p = np.zeros(sizes)
        for k, s in enumerate(self.scopes):
            shape = tuple(sizes[a] if a in s else 1 for a in range(len(sizes)))
            log_p = log_p + theta[self.offsets[k]: self.offsets[k + 1]].reshape(shape)
        p = np.exp(log_p - log_p.max())
        return p / p.sum()

    def clique_marginals(self, theta: FloatArray) -> list[tuple[Scope, FloatArray]] | None:
        """P over every clique of the junction tree (None with wide queries: no dense tree)."""
        if self._jt is None:
            return None
        return self._jt.clique_marginals(theta)

    def clique_tree(self, theta: FloatArray
                    ) -> tuple[list[tuple[Scope, FloatArray]], list[int]] | None:
        """(P over every clique of the junction tree, each clique's parent index or −1) — the
        input of :func:`tessera.estimation.tree_marginals.tree_marginal` and
        :func:`tessera.estimation.rows.rows_from_cliques`; None with wide queries."""
        if self._jt is None:
            return None
        cliques = self._jt.clique_marginals(theta)
        return cliques, [self._jt.clique_parent[k] - 1 for k in range(1, len(self._jt.cliques))]

    def sample(self, theta: FloatArray, m: int, rng: np.random.Generator,
               method: RowMethod = "rounding", columns: bool = False) -> npt.NDArray[np.int64]:
        """m rows (codes) from P_θ: from the junction tree's clique marginals
        (:func:`tessera.estimation.rows.rows_from_cliques`, ``method`` "rounding" or "iid"), or with
        wide queries i.i.d. from the engine's perfect sampler. ``columns``: transposed (one
        contiguous row per attribute)."""
        if self._jt is None:
            assert self._gibbs is not None
            rows = np.asarray(self._gibbs.with_theta(theta).sample(m, rng), dtype=np.int64)
            return np.ascontiguousarray(rows.T) if columns else rows
        cliques = self._jt.clique_marginals(theta)
        parents = [self._jt.clique_parent[k] - 1 for k in range(1, len(self._jt.cliques))]
        return rows_from_cliques(cliques, parents, self.domain.sizes, m, rng, method, columns)

    def extend(self, theta: FloatArray, old: ScopeModel) -> FloatArray:
        """``theta`` of ``old`` carried to this model (same scopes keep their tables; a new
        scope or query starts at 0; a scope that became a sub-scope of a new one is folded
        into the new one's table, which keeps P_θ the same)."""
        out = self.zero()
        for k, s in enumerate(old.scopes):
            t = theta[old.offsets[k]: old.offsets[k + 1]].reshape(old.shapes[k])
            c = self.container(s)
            if c is None:
                continue
            target = out[self.offsets[c]: self.offsets[c + 1]].reshape(self.shapes[c])
            axes = tuple(i for i, a in enumerate(self.scopes[c]) if a not in s)
            target += np.expand_dims(t, axes) if axes else t
        for j, pos in old.query_position.items():
            if j in self.query_position:
                out[self.query_position[j]] = theta[pos]
        return out


class GaussianLoss:
    """The fit's loss L(μ) (module docstring) and ∇_μ L for fixed measurements on a fixed
    model, vectorised: every measurement of one group folds into one quadratic
    (C/2)‖N μ_g − ȳ_g‖² + const, C = Σ 1/σ_m², ȳ = Σ (y_m/σ_m²)/C; the projections of all
    groups are one ``np.bincount``."""

    def __init__(self, model: ScopeModel, measurements: Sequence[GroupMeasurement],
                 total: float) -> None:
        groups: dict[Scope | int, list[GroupMeasurement]] = {}
        for m in measurements:
            if m.groups is not None:
                raise ValueError(f"the measurement of {m.scope} is coarsened: fit it over group "
                                 "codes (tessera.synth.coarsening.CoarseSpace.coarse)")
            groups.setdefault(m.key, []).append(m)
        src: list[IntArray] = []  # θ/μ entries ...
        dst: list[IntArray] = []  # ... and the group cell each one projects to
        precision: list[FloatArray] = []
        target: list[FloatArray] = []
        self.constant = 0.0
        at = 0
        for ms in groups.values():
            first = ms[0]
            ys = np.stack([np.asarray(m.y, dtype=np.float64).reshape(-1) for m in ms])
            c = np.stack([np.broadcast_to(1.0 / np.square(np.asarray(m.sd, dtype=np.float64)),
                                          ys.shape[1]) for m in ms])  # per-entry precisions
            prec = c.sum(axis=0)
            ybar = (c * ys).sum(axis=0) / prec
            self.constant += 0.5 * float((c * ys * ys).sum() - (prec * ybar * ybar).sum())
            if first.query is not None:
                s_idx = np.array([model.query_position[first.query]], dtype=np.intp)
                d_idx = np.array([at], dtype=np.intp)
            else:
                k = model.container(first.scope)
                if k is None:
                    raise KeyError(f"no model scope contains {first.scope}")
                scope, shape = model.scopes[k], model.shapes[k]
                cells = np.arange(math.prod(shape), dtype=np.intp)
                digits = np.unravel_index(cells, shape)
                sub = [i for i, a in enumerate(scope) if a in first.scope]
                local = np.ravel_multi_index(tuple(digits[i] for i in sub),
                                             tuple(shape[i] for i in sub)) if sub else \
                    np.zeros_like(cells)
                s_idx = model.offsets[k] + cells
                d_idx = at + local.astype(np.intp)
            src.append(s_idx)
            dst.append(d_idx)
            precision.append(prec)
            target.append(ybar)
            at += ybar.size
        self.src = np.concatenate(src)
        self.dst = np.concatenate(dst)
        self.precision = np.concatenate(precision)
        self.target = np.concatenate(target)
        self.n_cells = at
        self.n_parameters = model.n_parameters
        self.total = total

    def __call__(self, mu: FloatArray) -> tuple[float, FloatArray]:
        n = self.total
        proj = np.bincount(self.dst, weights=mu[self.src], minlength=self.n_cells)
        r = n * proj - self.target
        loss = 0.5 * float(self.precision @ (r * r)) + self.constant
        g_cells = n * self.precision * r
        grad = np.bincount(self.src, weights=g_cells[self.dst], minlength=self.n_parameters)
        return loss, grad


@dataclass(frozen=True)
class FitResult:
    """The fitted θ, its marginals μ, the loss, the step size to warm-start with, the
    iterations run and the engine calls made."""

    theta: FloatArray
    marginals: FloatArray
    loss: float
    alpha: float
    iterations: int
    oracle_calls: int


def gibbs_functions(domain: Domain, scopes: Sequence[Scope],
                    queries: Sequence[tuple[int, Function]],
                    cells: dict[Scope, tuple[Function, ...]] | None = None) -> list[Function]:
    """The engine functions of a :class:`ScopeModel` with wide queries: every scope's cells
    (row-major), then the queries. ``cells``: a memo of the scopes' cell queries (a caller
    that plans many models over the same scopes builds each once)."""
    functions: list[Function] = []
    for s in scopes:
        own = cells.get(tuple(s)) if cells is not None else None
        if own is None:
            own = tuple(Partition.marginal(domain, [domain.names[i] for i in s])
                        .cell_queries(domain))
            if cells is not None:
                cells[tuple(s)] = own
        functions.extend(own)
    functions.extend(f for _, f in queries)
    return functions


def cell_by_cell(domain: Domain, scopes: Sequence[Scope]) -> Scope | None:
    """The first scope of two or more attributes over more than
    :data:`~tessera.engine.factors.DENSE_MAX` cells, or None. The engine tabulates at most that
    many entries in one factor, so a Gibbs model with such a marginal's cells as features
    compiles every cell as an automaton of its own: on Adult, (fnlwgt, capital-gain,
    native-country, income>50K) — 86,016 cells — makes a plan of ~60–95 s that asks for
    ~340 GiB (docs/benchmarks.md, "the answerability constraint"). An engine pass beside such a
    model is refused without planning it (:func:`added_query_groups`,
    :func:`tessera.synth.model_answers.scope_marginal`)."""
    sizes = domain.sizes
    for s in scopes:
        if len(s) >= 2 and math.prod(sizes[a] for a in s) > DENSE_MAX:
            return tuple(s)
    return None


def cell_by_cell_error(domain: Domain, scope_: Scope, what: str) -> ResourceError:
    """The refusal of an engine pass beside a model with a marginal over ``scope_`` that the
    engine would compile cell by cell (:func:`cell_by_cell`); ``what`` names what is read."""
    cells = math.prod(domain.sizes[a] for a in scope_)
    names = ", ".join(domain.names[a] for a in scope_)
    return ResourceError(
        f"{what}: the model's marginal over {names} has {cells:,} cells, more than the "
        f"{DENSE_MAX:,} the engine tabulates in one factor, so an engine pass would compile "
        "every cell as an automaton of its own (refused without planning it)",
        hint="read it from a model without so large a marginal (a smaller max_cells)")


def added_query_groups(domain: Domain, scopes: Sequence[Scope],
                       queries: Sequence[tuple[int, Function]], added: Sequence[Function],
                       names: Sequence[str] | None = None,
                       *, memory_limit: int = DEFAULT_MEMORY_LIMIT,
                       cells: dict[Scope, tuple[Function, ...]] | None = None
                       ) -> list[tuple[int, int]]:
    """The groups ``added[lo:hi]`` in which :func:`added_query_probabilities` answers the
    ``added`` queries beside the model over ``scopes`` and ``queries`` (a :class:`ScopeModel`'s),
    decided without allocating a table: all in one pass when its plan fits ``memory_limit``,
    else each half the same way, down to single queries — the engine's own plan and guard
    (:meth:`~tessera.engine.model.GibbsModel.plan_of` of the model with the group added at
    θ = 0, the functions of :func:`gibbs_functions`), so the pass over these groups is never
    refused. A single query that does not fit raises the engine's
    :class:`~tessera.errors.ResourceError`, naming it (``names[j]``, else its position); so
    does the first query when a scope of the model would be compiled cell by cell
    (:func:`cell_by_cell`: refused before any plan). ``cells``: :func:`gibbs_functions`'s memo."""
    groups: list[tuple[int, int]] = []

    def refused(lo: int, hi: int) -> ResourceError | None:
        group = [(-1 - j, added[j]) for j in range(lo, hi)]
        try:
            GibbsModel.plan_of(domain, gibbs_functions(domain, scopes, [*queries, *group],
                                                       cells), memory_limit=memory_limit,
                               compile_guard=True)
        except ResourceError as e:
            return e
        return None

    def solve(lo: int, hi: int) -> None:
        e = refused(lo, hi)
        if e is None:
            groups.append((lo, hi))
        elif hi - lo > 1:
            mid = (lo + hi) // 2
            solve(lo, mid)
            solve(mid, hi)
        else:
            name = names[lo] if names is not None else f"#{lo}"
            raise ResourceError(f"query {name}: {e.message}", hint=e.hint) from None

    if added:
        big = cell_by_cell(domain, scopes)
        if big is not None:
            first = names[0] if names is not None else "#0"
            raise cell_by_cell_error(domain, big, f"query {first}")
        solve(0, len(added))
    return groups


def added_query_probabilities(model: ScopeModel, theta: FloatArray,
                              queries: Sequence[Function],
                              names: Sequence[str] | None = None,
                              *, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> FloatArray:
    """P_θ(q = 1) of queries q that are not features of ``model``, exactly: the model with q
    added as one more feature at weight θ_q = 0 is the same distribution (exp(0·q(x)) = 1),
    and the engine's pass over it gives μ_q (one compilation, one upward and downward pass).

    **In groups that fit the engine's memory guard** (:func:`added_query_groups`). All queries
    go into one pass when its decomposition fits ``memory_limit``; else the queries are halved
    and each half answered the same way, down to single queries. Queries over shared
    attributes tie the decomposition through their automata's states (k conjunctions crossing
    the same attributes can put 2^k states in one bag where each alone puts 2: 30 wide
    conjunctions over Adult need > 70 PiB together, ~10^5 bytes each), so a group that does not
    fit costs one refused plan (the guard runs before any table is allocated) and the answers
    are unchanged: each μ_q is a marginal of the same P_θ. A single query that does not fit
    raises the engine's :class:`~tessera.errors.ResourceError`, naming it (``names[j]``, else
    its position)."""
    out = np.empty(len(queries))
    cells: dict[Scope, tuple[Function, ...]] = {}
    for lo, hi in added_query_groups(model.domain, model.scopes, model.queries, queries, names,
                                     memory_limit=memory_limit, cells=cells):
        added = [(-1 - j, queries[j]) for j in range(lo, hi)]
        extra = ScopeModel(model.domain, model.scopes, [*model.queries, *added],
                           memory_limit=memory_limit)
        mu = extra.marginals(extra.extend(theta, model))
        for j in range(lo, hi):
            out[j] = float(mu[extra.query_position[-1 - j]])
    return out


def initial_step(measurements: Sequence[GroupMeasurement], total: float) -> float:
    """α₀ = 1/L with L = N² max_group Σ_{m on group} 1/σ_m² (the smoothness of L in μ)."""
    per: dict[object, float] = {}
    for m in measurements:
        per[m.key] = per.get(m.key, 0.0) + float(np.max(1.0 / np.square(m.sd)))
    return 1.0 / (total * total * max(per.values()))


@one_blas_thread
def fit(model: ScopeModel, measurements: Sequence[GroupMeasurement], total: float,
        *, theta: FloatArray | None = None, alpha: float | None = None,
        iterations: int = 100, tolerance: float = 1e-7, momentum: bool = False) -> FitResult:
    """Entropic mirror descent with Armijo steps (module docstring) from ``theta`` (default 0;
    in ``model``'s layout), for at most ``iterations`` steps (accepted or not); stops early when
    an accepted step lowers the loss by less than ``tolerance`` relative. ``momentum``: the
    accelerated form (:func:`_fit_momentum`)."""
    theta = model.zero() if theta is None else np.asarray(theta, dtype=np.float64)
    alpha = initial_step(measurements, total) if alpha is None else alpha
    objective = GaussianLoss(model, measurements, total)
    if momentum:
        return _fit_momentum(model, objective, theta, alpha, iterations, tolerance)
    mu = model.marginals(theta)
    calls = 1
    loss, grad = objective(mu)
    it = 0
    while it < iterations:
        it += 1
        theta2 = theta - alpha * grad
        mu2 = model.marginals(theta2)
        calls += 1
        loss2, grad2 = objective(mu2)
        if math.isfinite(loss2) and loss - loss2 >= 0.5 * alpha * float(grad @ (mu - mu2)):
            done = loss - loss2 <= tolerance * max(loss, 1e-300)
            theta, mu, loss, grad = theta2, mu2, loss2, grad2
            alpha *= 1.01
            if done:
                break
        else:
            alpha *= 0.5
    return FitResult(theta, mu, loss, alpha, it, calls)


def _fit_momentum(model: ScopeModel, objective: GaussianLoss, theta: FloatArray, alpha: float,
                  iterations: int, tolerance: float) -> FitResult:
    """Mirror descent with Nesterov extrapolation in the natural parameters and adaptive
    restart (O'Donoghue & Candès, "Adaptive restart for accelerated gradient schemes", 2015):
    y = θ_k + (k−1)/(k+2) (θ_k − θ_{k−1}); θ_{k+1} = y − α ∇_μ L(μ(y)) with the Armijo test of
    :func:`fit` taken at y; the momentum restarts (k ← 1) whenever L(θ_{k+1}) > L(θ_k), so every
    accepted iterate lowers the loss. θ stays in the span of the measured scopes' features (a
    member of P_θ, as in plain mirror descent). ``iterations`` counts engine calls' pairs."""
    mu = model.marginals(theta)
    calls = 1
    loss, grad = objective(mu)
    prev = theta
    k = 1
    it = 0
    while it < iterations:
        it += 1
        beta = (k - 1) / (k + 2)
        if beta > 0:
            y = theta + beta * (theta - prev)
            mu_y = model.marginals(y)
            calls += 1
            loss_y, grad_y = objective(mu_y)
        else:
            y, mu_y, loss_y, grad_y = theta, mu, loss, grad
        theta2 = y - alpha * grad_y
        mu2 = model.marginals(theta2)
        calls += 1
        loss2, grad2 = objective(mu2)
        if not (math.isfinite(loss2)
                and loss_y - loss2 >= 0.5 * alpha * float(grad_y @ (mu_y - mu2))):
            alpha *= 0.5  # the step was too long at y: shorter, same momentum
            continue
        if loss2 > loss:  # the momentum overshot: restart from θ_k
            k = 1
            prev = theta
            continue
        done = loss - loss2 <= tolerance * max(loss, 1e-300)
        prev, theta, mu, loss, grad = theta, theta2, mu2, loss2, grad2
        alpha *= 1.01
        k += 1
        if done:
            break
    return FitResult(theta, mu, loss, alpha, it, calls)
