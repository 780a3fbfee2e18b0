"""What the files and the report read of a release: a small protocol (docs/architecture.md).

:class:`~tessera.release.answering.Release` satisfies it; :mod:`.output`, :mod:`.report` and
:mod:`.report_figures` take any :class:`ReleaseView`, so they need not import the module that
calls them (no import cycle).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.mechanisms.record import MechanismRecord
from tessera.release.ledger import Charge
from tessera.release.plan import NoisePlan
from tessera.release.strategy_release import Reconstructed
from tessera.workload.workload import Workload


class ReleaseView(Protocol):
    """Noisy answers of a workload with their plan, mechanism, post-processing and certificate
    (the fields of :class:`~tessera.release.answering.Release`)."""

    plan: NoisePlan
    noisy: npt.NDArray[np.int64]
    mechanism: MechanismRecord
    postprocessed: dict[str, npt.NDArray[np.float64]]
    postprocessing_notes: dict[str, str]
    certificate: dict[str, Any]
    charge: Charge | None
    #: W's answers reconstructed from a measured strategy (None: W itself was measured)
    strategy: Reconstructed | None

    @property
    def private(self) -> bool: ...

    @property
    def workload(self) -> Workload: ...

    @property
    def answers(self) -> npt.NDArray[np.float64]: ...

    def to_frame(self) -> pd.DataFrame: ...
