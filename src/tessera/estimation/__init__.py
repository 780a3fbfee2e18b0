"""Estimation from noisy measurements: post-processing shared by answering and synthesis.

* :mod:`~tessera.estimation.maxent`: the maximum-entropy (Private-PGM) fit of a Gibbs model to
  noisy marginals and query answers, on the engine's junction tree (docs/theory.md §5);
* :mod:`~tessera.estimation.rows`: rows drawn from a fitted model's clique marginals.

Nothing here reads the data: every function takes noisy measurements and public values only.
"""
