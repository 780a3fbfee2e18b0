"""The audit of aggregate statements counting people (tessera.audit.people_aggregate_case,
docs/security.md): each honest release stays within its claim, each planted bug — the engine
clamping rows instead of a person's total, the noise calibrated to a row's cost instead of the
coverage — is caught at 20,000 runs a side (its exact event log-ratio is 2.7 and 3 against a
claim of 1)."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.audit.people_aggregate_case import people_sum_case, people_sum_setup
from tessera.audit.run import audit

TRIALS = 20_000


@pytest.mark.parametrize("kind", ["one group", "three years"])
def test_honest_passes_and_planted_is_caught(kind):
    honest = audit(people_sum_case(kind), TRIALS, 0)
    assert not honest.violated and honest.epsilon_lb > 0.7, honest
    planted = audit(people_sum_case(kind, planted=True), TRIALS, 0)
    assert planted.violated and planted.epsilon_lb > 2.0, planted


def test_setups_move_what_the_docs_say():
    one = people_sum_setup("one group")
    assert one.plan.scales.tolist() == pytest.approx([2.0])
    moved = np.array(one.moved)
    # summed by rows, the person's three rows of v = 5 add 2 + 2 + 2
    assert (one.by_rows[moved] - one.answers[1][moved]).tolist() == [6]
    years = people_sum_setup("three years")
    assert years.plan.scales.tolist() == pytest.approx([6.0] * 3)
    assert years.row_scales.tolist() == pytest.approx([2.0] * 3)
    assert len(years.moved) == 3
