"""What a synthesis run does with the columns outside its workload (docs/synth.md, "Columns
outside the workload").

A model fitted to a workload alone says nothing about an attribute that no query and no family
mentions (:func:`tessera.synth.candidates.outside_attributes`): its rows would carry that column
uniformly at random (on Adult with 66 2-way marginals over 12 attributes, ``capital-gain``, 0
in 91.7 % of the real rows, was 0 in none of the synthetic ones). So, by default:

* ``adaptive`` measures the one-way marginal of every such attribute once, at the
  initialisation and at the noise of the workload's first one-way measurements, charged to the
  same budget (the record's ``columns``: which, and their share of the budget);
* ``ipmwu``, ``mwem`` and ``lp`` run Ghazi et al.'s algorithms on the workload as given and add
  no measurement of their own: a workload that leaves attributes out is refused, before any
  budget is spent (:func:`check_columns`), with the ways forward — add the attributes' one-way
  marginals to the workload, use the adaptive method, or accept uniform columns;
* ``uniform_columns=True`` (``--uniform-columns``) is the explicit choice of uniform columns:
  every method then runs on the workload alone, warns on stderr (:func:`warn_uniform`) and
  names the uniform columns in its run record (:func:`columns_record`).
"""

from __future__ import annotations

import warnings
from typing import Any

from tessera.errors import QueryError, QueryWarning
from tessera.synth.candidates import outside_attributes
from tessera.workload.workload import Workload

__all__ = ["check_columns", "columns_record", "outside_names", "warn_uniform"]

#: How many names a message lists before "… and k more".
_LISTED = 8


def outside_names(workload: Workload) -> tuple[str, ...]:
    """The names of the attributes no query and no family of ``workload`` mentions."""
    names = workload.domain.names
    return tuple(names[a] for a in outside_attributes(workload))


def _listed(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown + (f" … and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def check_columns(method: str, workload: Workload, uniform: bool) -> None:
    """Refuse (QueryError, before any budget is spent) a run of ``ipmwu``, ``mwem`` or ``lp``
    whose workload leaves attributes out, unless ``uniform`` accepts them uniformly random
    (module docstring); the adaptive method measures them itself."""
    if method == "adaptive" or uniform:
        return
    outside = outside_names(workload)
    if not outside:
        return
    raise QueryError(
        f"method {method!r} fits the workload as given, and no query or family of it mentions "
        f"{len(outside)} attribute(s): {_listed(outside)}; their columns would come out "
        "uniformly random",
        hint="add their one-way marginals to the workload (a family per attribute: they are "
             "then measured and fitted like any query), use --method adaptive (it measures "
             "them itself), or accept uniform columns with --uniform-columns "
             "(uniform_columns=True)")


def warn_uniform(workload: Workload, rows: bool = True) -> None:
    """The stderr warning of a run that leaves the workload's outside columns uniformly random
    (a :class:`~tessera.errors.QueryWarning`; the CLI prints it as one ``warning:`` line).
    Nothing when every attribute is in the workload or no row is drawn (``rows`` False)."""
    outside = outside_names(workload)
    if outside and rows:
        warnings.warn(QueryWarning(
            f"uniform columns: {len(outside)} attribute(s) outside the workload come out "
            f"uniformly random in the synthetic rows: {_listed(outside)} (the run record "
            "names them)"), stacklevel=3)


def columns_record(workload: Workload, measured: tuple[str, ...] = (),
                   share: float = 0.0) -> dict[str, Any]:
    """The run record's ``columns``: the attributes outside the workload and what the run did
    with them — ``measured`` (their one-way marginals, costing ``share`` of the budget) or
    ``uniform`` (every other one: nothing of it was measured, so the rows carry it uniformly
    at random)."""
    outside = list(outside_names(workload))
    return {"outside_workload": outside, "measured": list(measured), "budget_share": share,
            "uniform": [a for a in outside if a not in measured]}
