"""Where the randomness comes from: OpenDP's secure sampler, or a seeded source for tests.

Tessera's standard (docs/theory.md §7): privacy noise and private selections are drawn by
OpenDP's exact samplers from OpenDP's secure randomness (the operating system's CSPRNG, through
the Rust library). Floating-point sampling with numpy is *not* private — Mironov (CCS 2012)
showed that the low-order bits of naive floating-point noise reveal the true value — and numpy's
generators are not cryptographically secure. A seed therefore exists for tests only:
:meth:`NoiseSource.seeded` draws from a numpy ``Generator`` with the *same* discrete
distributions (so distributional tests are meaningful and reproducible), and every output made
with it is flagged ``private=False``.

OpenDP below :data:`MIN_OPENDP` is refused when the first sampler is built
(:func:`check_opendp`): before 0.14 there is no ``make_noisy_max``, and the discrete Laplace and
Gaussian samplers of 0.14.0 and 0.14.1 fail Tessera's distribution tests (tests/mechanisms:
chi-square against the exact pmf; 60,000 draws at b = 3 put z-scores above 10 on the multiples
of 3, where 0.14.2 to 0.16.0 pass).

>>> NoiseSource.secure().private
True
>>> NoiseSource.seeded(7).private
False
"""

from __future__ import annotations

import importlib.metadata
import re
import types
from dataclasses import dataclass, field

import numpy as np

from tessera.errors import TesseraError

__all__ = ["MIN_OPENDP", "NoiseSource", "check_opendp", "opendp_prelude"]

#: The oldest OpenDP whose samplers Tessera uses (module docs; pyproject.toml states the range).
MIN_OPENDP = (0, 14, 2)

_FEATURES_ENABLED = False


def check_opendp(version: str) -> None:
    """Refuse an OpenDP ``version`` below :data:`MIN_OPENDP` (module docs), with the install
    line. A version whose leading ``X.Y.Z`` cannot be read is refused too."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if m is None or tuple(int(g) for g in m.groups()) < MIN_OPENDP:
        least = ".".join(map(str, MIN_OPENDP))
        raise TesseraError(
            f"OpenDP {version} is installed; Tessera's noise needs OpenDP {least} or newer "
            "(older releases lack make_noisy_max, or draw noise whose distribution Tessera's "
            "tests reject)",
            hint=f"pip install 'opendp>={least},<0.17'")


def opendp_prelude() -> types.ModuleType:
    """``opendp.prelude`` with the ``"contrib"`` feature enabled (needed by every sampler here).

    Only ``"contrib"`` is enabled: all Tessera noise is added on integer domains, so OpenDP's
    ``"floating-point"`` feature is never needed. ``enable_features`` is process-global in
    OpenDP; it is called once, on first use.
    """
    global _FEATURES_ENABLED
    if not _FEATURES_ENABLED:
        try:
            installed = importlib.metadata.version("opendp")
        except importlib.metadata.PackageNotFoundError:
            installed = "(no package metadata)"
        check_opendp(installed)
    import opendp.prelude as dp

    if not _FEATURES_ENABLED:
        dp.enable_features("contrib")
        _FEATURES_ENABLED = True
    return dp


@dataclass(frozen=True)
class NoiseSource:
    """A source of randomness for the mechanisms: OpenDP's secure one, or a seeded test one.

    Build it with :meth:`secure` (the default everywhere) or :meth:`seeded` (tests only).
    ``private`` is ``True`` exactly for the secure source; mechanisms copy it into the
    :class:`~tessera.mechanisms.MechanismRecord` of everything they output.
    """

    private: bool
    seed: int | None = None
    _generator: np.random.Generator | None = field(default=None, repr=False, compare=False)

    @staticmethod
    def secure() -> NoiseSource:
        """OpenDP's exact samplers on the operating system's secure randomness (private)."""
        return _SECURE

    @staticmethod
    def seeded(seed: int) -> NoiseSource:
        """A reproducible numpy ``Generator(PCG64(seed))``: FOR TESTS ONLY, ``private=False``.

        The samplers implement the same discrete distributions on it (discrete Laplace as a
        difference of geometrics, discrete Gaussian by Canonne–Kamath–Steinke rejection,
        exponential mechanism by Gumbel-max), but with floating-point arithmetic and a
        non-cryptographic generator: its outputs must be labelled NOT PRIVATE.
        """
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise TesseraError(f"a seed must be a non-negative integer, got {seed!r}")
        return NoiseSource(
            private=False, seed=int(seed), _generator=np.random.default_rng(int(seed))
        )

    @property
    def generator(self) -> np.random.Generator:
        """The numpy generator of a seeded source; an error for the secure source."""
        if self._generator is None:
            raise TesseraError(
                "the secure noise source has no numpy generator",
                hint="private noise is drawn by OpenDP; only NoiseSource.seeded() is numpy",
            )
        return self._generator

    @property
    def label(self) -> str:
        """How a report names the randomness."""
        if self.private:
            return "OpenDP secure randomness"
        return f"seeded numpy PCG64 (seed {self.seed}) — NOT PRIVATE"


_SECURE = NoiseSource(private=True)
