"""Private releases: answering, the budget ledger, certificates, reports (docs/theory.md §3,
§7, §9).

* :mod:`~tessera.release.budget`: the user's target and what it is calibrated as;
* :mod:`~tessera.release.plan`: per-query noise from the public inputs alone;
* :mod:`~tessera.release.answering`: plan → charge → count → noise → post-process;
* :mod:`~tessera.release.ledger`: the SQLite budget ledger, overlap-aware across releases
  (its file format in :mod:`~.ledger_store`, records in :mod:`~.ledger_records`, exact cost
  bounds in :mod:`~.exact_costs` and :mod:`~.decimals`);
* :mod:`~tessera.release.certificate`: the certificate and its verification;
* :mod:`~tessera.release.consistency`: least-squares consistency (free post-processing);
* :mod:`~tessera.release.report`: the HTML report (:mod:`~.report_figures`,
  :mod:`~.report_html`); :mod:`~tessera.release.output`: answer files.

Submodules are imported on first use, so ``import tessera.release.ledger`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Budget": "tessera.release.budget",
    "BudgetExceeded": "tessera.release.ledger",
    "Ledger": "tessera.release.ledger",
    "NoisePlan": "tessera.release.plan",
    "Release": "tessera.release.answering",
    "answer": "tessera.release.answering",
    "noise_plan": "tessera.release.plan",
    "verify_certificate": "tessera.release.certificate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tessera.release' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
