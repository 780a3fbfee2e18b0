"""Statistical privacy audits: lower bounds on ε measured from many runs (docs/security.md).

Each audit runs a mechanism as Tessera runs it on a worst-case pair of neighbouring data sets,
estimates the probability of output events fixed in advance under both with Clopper–Pearson
intervals and turns them into a lower bound on the ε the mechanism can satisfy
(:mod:`~tessera.audit.estimators`). The mechanisms, pairs, events and claims are in
:mod:`~tessera.audit.cases` (with planted bugs the audits must catch), the table in
:mod:`~tessera.audit.run` (``tessera audit`` prints it). A bound above the claimed ε proves a
privacy bug; a bound below it proves nothing (an audit is a test, not a proof).
"""

from tessera.audit.estimators import EventCounts, best_lower_bound, epsilon_lower_bound
from tessera.audit.run import AuditRow, audit, audit_table

__all__ = [
    "AuditRow",
    "EventCounts",
    "audit",
    "audit_table",
    "best_lower_bound",
    "epsilon_lower_bound",
]
