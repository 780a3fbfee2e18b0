"""Statistical privacy audits: lower bounds on ε measured from many runs (docs/security.md).

Each audit runs a mechanism as Tessera runs it on a worst-case pair of neighbouring data sets,
estimates the probability of a fixed output event under both with Clopper–Pearson intervals
and turns them into a lower bound on the ε the mechanism can satisfy
(:mod:`~tessera.audit.estimators`). A bound above the claimed ε proves a privacy bug; a bound
below it proves nothing (an audit is a test, not a proof).
"""
