"""Answering routes that use both the release layer and the synthesizer (docs/theory.md §5,
§9, §10.5).

* :mod:`~tessera.routes.adaptive`: ``tessera answer --estimate adaptive`` —
  :func:`~tessera.routes.adaptive.answer_adaptive` spends the release's budget on the adaptive
  synthesizer's select–measure–fit loop (its accounting and run record unchanged) and answers
  every query of the workload from the fitted model, exactly (the engine's marginals);
* :mod:`~tessera.routes.model_files`: its answer files (the layout of ``tessera answer``'s) and
  its certificate (the synthesis run record with an ``answers`` section).

It sits beside :mod:`tessera.audit` and :mod:`tessera.demo`, above :mod:`tessera.release` and
:mod:`tessera.synth`, which never import each other.
"""
