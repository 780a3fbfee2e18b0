"""Brute-force references (test oracles) for the suite: exponential by design, tiny inputs only.

* :mod:`.overlap`: maximum overlap and substitution by enumerating subsets or every point of 𝔻,
  and :func:`~.overlap.is_proper` for colourings;
* :mod:`.engine`: log Z, the maximum and E[f] of a Gibbs model by enumerating 𝔻;
* :mod:`.foundation`: random domains, queries and tables; coverages and counts by enumeration;
* :mod:`.accounting`: trade-off functions from their definition (all tests, lower hulls).
"""
