"""How much of a seeded adaptive run's error is the structure it chose and how much the noise
(docs/benchmarks.md): the run's model refitted, by maximum likelihood to
convergence, on the *exact* marginals of the scopes it measured (the same model, no noise).
The refit's error is the floor of that structure; the run's own error above it is what the
noise leaves in the estimate. Seeded noise: a benchmark, NOT PRIVATE. Usage::

    python bench/synth_structure_floor.py nltcs 0.1 0 [prior_scale=0 ...]   # data, ε, seed
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_synth as ab  # noqa: E402
import bench_synth as bs  # noqa: E402
import numpy as np  # noqa: E402

import tessera as ts  # noqa: E402
from tessera.estimation.maxent import fit  # noqa: E402


def main() -> None:
    data, eps, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    opts = ab.parse_opt(sys.argv[4:])
    frame, w, real, n = ab.setting(data)
    dom = w.domain
    res = ts.Synthesizer("adaptive", **opts).fit(frame, w, bs.budget(eps),
                                                 neighbours=bs.NEIGHBOURS, seed=seed).result
    tables: dict[tuple[int, ...], np.ndarray] = {}  # the workload's exact marginals (fractions)
    at = len(w.queries)
    for p in w.partitions:
        scope = tuple(sorted(dom.index(a) for a in p.attributes))
        shape = [dom.sizes[i] for i in scope]
        cells = int(np.prod(shape))
        tables[scope] = real[at:at + cells].reshape(shape)
        at += cells

    def exact(scope: tuple[int, ...]) -> np.ndarray:
        for s, t in tables.items():
            if set(scope) <= set(s):
                return t.sum(axis=tuple(i for i, a in enumerate(s) if a not in scope)).ravel() * n
        raise SystemExit(f"scope {scope} lies in no workload marginal: no exact counts here")

    if any(m.query is not None or m.groups is not None for m in res.measurements):
        raise SystemExit("the run measured wide queries or coarsened marginals: not supported")
    clean = [dataclasses.replace(m, y=exact(m.scope)) for m in res.measurements]
    floor = fit(res.model, clean, float(n), iterations=3000, momentum=True)
    print(f"measured scopes {len({m.scope for m in res.measurements})}, "
          f"rounds {len(res.record.history)}")
    print(f"the run's model: mean marginal L1 {ab.model_error(res, w, real, n):.4f}")
    print(f"the same model on exact marginals: "
          f"{ab.model_error(dataclasses.replace(res, fit=floor), w, real, n):.4f}")


if __name__ == "__main__":
    main()
