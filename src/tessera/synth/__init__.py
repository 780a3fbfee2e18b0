"""Private synthetic data from noisy workload answers (docs/theory.md §5, §6).

* :mod:`.ipmwu` — IPMWU, Ghazi et al.'s Algorithm 1 with implicit Gibbs weights
  (``from tessera.synth.ipmwu import ipmwu``);
* :mod:`.mwem` — the same rounds on an explicit histogram, d ≤ 20: the baseline
  (``from tessera.synth.mwem import mwem``);
* :mod:`.sensitive` — the exact counts a run reads and the evaluator of queries on rows;
* :mod:`.parameters` — Ghazi et al.'s T, β, m and rows;
* :mod:`.rounds` — the round driver IPMWU and MWEM share, with its record and transcript;
* :mod:`.accounting` — their budget split and the proof of what a run spent;
* :mod:`.synthesizer` — :class:`Synthesizer`: method, budget, ledger and rows in one call;
  :mod:`.charge` its budget target and ledger charge, :mod:`.fitted` the fitted result,
  :mod:`.record` its run record; :mod:`.defaults` the budget stated as keywords and the
  default workload of ``Synthesizer(epsilon=..., domain=...).fit_sample(df)``;
* :mod:`.evaluate` — errors of synthetic rows against the real data (``from
  tessera.synth.evaluate import evaluate``).

Other names are exported lazily (importing :mod:`tessera.synth` loads no submodule). A function
named like its module (``ipmwu``, ``mwem``) is not: once the submodule is imported, the package
attribute of that name is the module, so it is imported from the module itself.
"""

from __future__ import annotations

import importlib
from typing import Any

#: name → submodule that defines it (add a module's public names here)
_LAZY: dict[str, str] = {
    "IPMWUResult": "ipmwu",
    "RunRecord": "rounds",
    "Transcript": "rounds",
    "SensitiveCounts": "sensitive",
    "sensitive_counts": "sensitive",
    "default_parameters": "parameters",
    "MWEMResult": "mwem",
    "RoundProgress": "rounds",
    "Synthesizer": "synthesizer",
    "FittedSynthesizer": "fitted",
    "Evaluation": "evaluate",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
