"""How much the adaptive method's selection noise costs (docs/benchmarks.md): the same seeded
run with every round's exponential mechanism replaced by the true argmax of
its quality scores — an **oracle**, reading the exact scores without noise, NOT PRIVATE — while
the measurements, their noise, the budget schedule and the accounting stay as they are (the
mechanism is still drawn, so the seeded noise stream is the same up to the first different
choice). The gap to the real run bounds what any better selection could gain at the same
measurement budget. Usage::

    python bench/synth_oracle_selection.py nltcs 0.1 0 1 2 3 4     # data, ε, seeds
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_synth as ab  # noqa: E402
import bench_synth as bs  # noqa: E402
import numpy as np  # noqa: E402

import tessera as ts  # noqa: E402
from tessera.mechanisms import exponential  # noqa: E402

NOISY_SELECT = exponential.ExponentialMechanism.select


def argmax_select(self: exponential.ExponentialMechanism, scores: Any, source: Any = None,
                  runs: int = 1) -> exponential.Selection:
    """The mechanism's own draw (same record, same stream), its choice replaced by the argmax."""
    drawn = NOISY_SELECT(self, scores, source, runs)
    best = int(np.argmax(np.asarray(scores, dtype=np.float64)))
    return dataclasses.replace(drawn, indices=np.full(len(drawn.indices), best, dtype=np.int64))


def model_errors(data: str, eps: float, seeds: list[int]) -> list[float]:
    frame, w, real, n = ab.setting(data)
    out = []
    for s in seeds:
        res = ts.Synthesizer("adaptive").fit(frame, w, bs.budget(eps), neighbours=bs.NEIGHBOURS,
                                             seed=s).result
        out.append(ab.model_error(res, w, real, n))
    return out


def main() -> None:
    data, eps, seeds = sys.argv[1], float(sys.argv[2]), [int(s) for s in sys.argv[3:]]
    noisy = model_errors(data, eps, seeds)
    exponential.ExponentialMechanism.select = argmax_select  # type: ignore[method-assign]
    try:
        oracle = model_errors(data, eps, seeds)
    finally:
        exponential.ExponentialMechanism.select = NOISY_SELECT  # type: ignore[method-assign]
    print("| seed | the run (model L1) | argmax selection | ratio |")
    print("|---:|---:|---:|---:|")
    for s, a, b in zip(seeds, noisy, oracle, strict=True):
        print(f"| {s} | {a:.4f} | {b:.4f} | {b / a:.3f} |")
    ratios = [b / a for a, b in zip(noisy, oracle, strict=True)]
    se = statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else float("nan")
    print(f"\nmean {statistics.fmean(noisy):.4f} → {statistics.fmean(oracle):.4f}; "
          f"paired ratio {statistics.fmean(ratios):.3f} ± {se:.3f}")


if __name__ == "__main__":
    main()
