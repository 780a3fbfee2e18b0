"""``tessera demo``: both main jobs end to end — private answers and private synthetic data —
on a population the project makes itself (:mod:`~tessera.demo.end_to_end`). It sits beside
:mod:`tessera.audit`, above :mod:`tessera.release` and :mod:`tessera.synth`, the one layer that
uses both.
"""
