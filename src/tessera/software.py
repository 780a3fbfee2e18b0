"""The software a result was made with, and the optional dependencies.

:func:`versions` is what every certificate and run record states under ``software``: Tessera's
version, and those of the libraries whose code decides what was released — OpenDP (every noise
sample and selection: :mod:`tessera.mechanisms`) and dp-accounting (the privacy-loss
distributions of the (ε, δ) conversions: :mod:`tessera.accounting.pld`) — and of Python. A
reviewer who re-runs ``tessera verify`` with other versions can then tell a difference caused by
the software from one in the inputs (docs/certificate.md).

:func:`require` imports an optional dependency (an *extra* of the ``tessera-dp`` distribution,
``pyproject.toml``) or fails with one line that names the extra to install.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import platform
from types import ModuleType

from tessera import __version__
from tessera.errors import TesseraError

__all__ = ["DISTRIBUTION", "RECORDED", "require", "versions"]

#: The distribution (``pip install tessera-dp``) this package is.
DISTRIBUTION = "tessera-dp"
#: The distributions whose versions :func:`versions` records, besides Tessera's and Python's.
RECORDED = ("opendp", "dp-accounting")


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str | None], ...]:
    return (("tessera", __version__), *((name, _installed(name)) for name in RECORDED),
            ("python", platform.python_version()))


def versions() -> dict[str, str | None]:
    """``{"tessera", "opendp", "dp-accounting", "python"}`` → the version in use (``None``: that
    distribution has no installed metadata; the libraries' versions are their distributions',
    Python's is ``platform.python_version()``). A new dict each call (a caller may edit it)."""
    return dict(_versions())


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """``import module``, or a :class:`TesseraError` saying that ``purpose`` needs it and how to
    install it (``pip install 'tessera-dp[extra]'``)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.partition(".")[0]
        raise TesseraError(
            f"{purpose} needs {top}, which is not installed",
            hint=f"pip install '{DISTRIBUTION}[{extra}]' (or pip install {top})",
        ) from None
