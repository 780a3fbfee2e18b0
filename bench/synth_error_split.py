"""Where a seeded adaptive run's error sits: its rounds (candidate, cells, noise, selection ε,
annealed) and the fitted model's mean L1 over the workload's marginals, split into the scopes the
run measured and those it never measured (docs/benchmarks.md, "annealing in finer
steps"). Seeded noise: a benchmark, NOT PRIVATE. Usage::

    python bench/synth_error_split.py nltcs 1 0 [anneal=2 ...]   # data, ε, seed, options
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_synth as ab  # noqa: E402
import bench_synth as bs  # noqa: E402
import numpy as np  # noqa: E402

import tessera as ts  # noqa: E402
from tessera.synth.adaptive_record import model_counts  # noqa: E402


def main() -> None:
    data, eps, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    opts = ab.parse_opt(sys.argv[4:])
    frame, w, real, _ = ab.setting(data)
    fitted = ts.Synthesizer("adaptive", **opts).fit(frame, w, bs.budget(eps),
                                                    neighbours=bs.NEIGHBOURS, seed=seed)
    res = fitted.result
    for h in res.record.history:
        print(h.round, h.candidate, h.cells, f"noise {h.noise:.1f}",
              f"selection ε {h.selection_epsilon:.4f}", "annealed" if h.annealed else "")
    marginals = ts.Workload.of_families(w.domain, list(w.partitions))
    model = model_counts(res, marginals) / res.total
    exact = real[len(w.queries):]
    measured = {tuple(sorted(m.scope)) for m in res.measurements}
    dom = w.domain
    split: dict[bool, list[float]] = {True: [], False: []}
    at = 0
    for p in w.partitions:
        cells = int(np.prod([dom.sizes[dom.index(a)] for a in p.attributes]))
        scope = tuple(sorted(dom.index(a) for a in p.attributes))
        split[scope in measured].append(float(np.abs(model[at:at + cells]
                                                     - exact[at:at + cells]).sum()))
        at += cells
    for key, name in ((True, "measured"), (False, "never measured")):
        v = split[key]
        print(f"{name}: {len(v)} marginals, mean L1 {np.mean(v) if v else float('nan'):.4f}")
    print(f"rounds {len(res.record.history)}, T = {res.record.parameters.rounds}")


if __name__ == "__main__":
    main()
