"""Where the shared real data sets live: ``../shared/data`` beside the project root.

``TESSERA_SHARED_DATA`` overrides it. Tests that need the data skip (with the path in the
reason) when it is absent, so the suite also runs outside this workplace.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("TESSERA_SHARED_DATA", REPO.parent / "shared" / "data"))
