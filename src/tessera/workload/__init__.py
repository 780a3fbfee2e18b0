"""Workloads of counting queries over a public domain (docs/theory.md §2).

* :mod:`~tessera.workload.query`: predicate queries (a conjunction of per-attribute interval
  sets) and their overlap relations;
* :mod:`~tessera.workload.clause`: Boolean WHERE clauses (AND/OR/NOT of predicates);
* :mod:`~tessera.workload.value_classes`: the coarsest partition of each attribute's values
  that every query respects;
* :mod:`~tessera.workload.families`: marginals, data cubes, hierarchies — structured families
  never expanded to text;
* :mod:`~tessera.workload.parse`, :mod:`~tessera.workload.fastparse`: SQL ``WHERE`` → queries;
* :mod:`~tessera.workload.workload`: the :class:`~tessera.workload.workload.Workload` and its
  files; :mod:`~tessera.workload.builders`: the standard workloads (marginals, identity,
  prefixes, ranges, random); :mod:`~tessera.workload.sizes`: how much a workload holds, in
  words.
"""
