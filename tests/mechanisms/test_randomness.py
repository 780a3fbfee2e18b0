"""Noise sources, records, float rounding, and the layering rule of tessera.mechanisms."""

from __future__ import annotations

import ast
import importlib.metadata
import math
import re
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import tessera.mechanisms as mechanisms
from tessera.errors import TesseraError
from tessera.mechanisms import MechanismRecord, NoiseSource, discrete_laplace
from tessera.mechanisms.randomness import check_opendp
from tessera.mechanisms.record import float_at_least
from tessera.privacy import Definition

PACKAGE = Path(mechanisms.__file__).resolve().parent
ALLOWED_TESSERA = {"tessera.errors", "tessera.privacy"}
ALLOWED_THIRD_PARTY = {"numpy", "scipy", "opendp"}


def test_sources() -> None:
    secure = NoiseSource.secure()
    assert secure.private and secure is NoiseSource.secure()
    with pytest.raises(TesseraError, match="no numpy generator"):
        _ = secure.generator
    seeded = NoiseSource.seeded(4)
    assert not seeded.private and seeded.seed == 4
    assert "NOT PRIVATE" in seeded.label
    with pytest.raises(TesseraError):
        NoiseSource.seeded(-1)


def test_secure_draws_differ_between_calls() -> None:
    zeros = np.zeros(1000, dtype=np.int64)
    a = discrete_laplace.sample(zeros, 10.0).values
    b = discrete_laplace.sample(zeros, 10.0).values
    assert not np.array_equal(a, b)


def test_record_describe() -> None:
    rec = MechanismRecord("discrete Laplace (OpenDP make_laplace)", Definition.PURE, "scale b",
                          2.0, True)
    assert rec.describe() == "discrete Laplace (OpenDP make_laplace), pure ε-DP, scale b = 2"
    hidden = MechanismRecord("x", Definition.ZCDP, "σ", None, False)
    assert hidden.describe().endswith("NOT PRIVATE (seeded test randomness)")
    assert "per query" in hidden.describe()


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(2, 7), Fraction(10**20 + 1, 3), 5])
def test_float_at_least_is_the_smallest_float_above(x: Fraction) -> None:
    f = float_at_least(x)
    assert Fraction(f) >= x
    assert Fraction(math.nextafter(f, -math.inf)) < x


def module_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_"))
    return names


def test_layering_and_no_private_cross_imports() -> None:
    """tessera.mechanisms imports only numpy/scipy/opendp, tessera.errors, tessera.privacy and
    itself, imports no ``_private`` name from another module, and only randomness.py calls into
    ``np.random`` (to build the seeded test source; others may only name the Generator type)."""
    for path in sorted(PACKAGE.glob("*.py")):
        for name in module_imports(path):
            top = name.split(".")[0]
            if top == "tessera":
                assert name.startswith("tessera.mechanisms") or name in ALLOWED_TESSERA, (
                    path.name, name)
                assert not name.rsplit(".", 1)[-1].startswith("_"), (path.name, name)
            else:
                assert top in ALLOWED_THIRD_PARTY or top in sys.stdlib_module_names, (
                    path.name, name)
        if path.name != "randomness.py":
            assert not re.search(r"np\.random\.(?!Generator\b)", path.read_text()), path.name


@pytest.mark.parametrize("version", ["0.12.1", "0.13.0", "0.14.0", "0.14.1",
                                     "(no package metadata)"])
def test_an_opendp_whose_samplers_fail_the_tests_is_refused(version: str) -> None:
    """Before 0.14 make_noisy_max is missing; 0.14.0 and 0.14.1 draw discrete Laplace and
    Gaussian noise that test_opendp_sampler_matches_theory rejects (measured)."""
    with pytest.raises(TesseraError, match=r"OpenDP 0\.14\.2 or newer") as caught:
        check_opendp(version)
    assert "pip install 'opendp>=0.14.2,<0.17'" in str(caught.value)


@pytest.mark.parametrize("version", ["0.14.2", "0.15.1", "0.16.0", "0.16.0a20261005001"])
def test_the_opendp_releases_that_pass_are_accepted(version: str) -> None:
    check_opendp(version)
    check_opendp(importlib.metadata.version("opendp"))  # the one installed here
