"""The version has one literal (``pyproject.toml``), read from the package metadata; every
certificate states the software that made it (``software``: Tessera, OpenDP, dp-accounting,
Python), and ``verify`` still accepts a certificate made before it was recorded."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tessera
from tessera.errors import TesseraError
from tessera.release import Budget, answer, verify_certificate
from tessera.release.certificate import digest
from tessera.release.report import render_report
from tessera.schema.domain import Domain
from tessera.software import require, versions
from tessera.workload.workload import Workload

ROOT = Path(__file__).parents[2]
DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "sex": {"type": "categorical", "values": ["F", "M"]}}})
WL = Workload.from_sql(["age < 5", "age >= 5", "sex = 'F'", "age >= 5 AND sex = 'M'"], DOMAIN)


def _frame(n: int = 500) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.integers(0, 10, n), "sex": rng.choice(["F", "M"], n)})


def _pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_the_version_is_the_metadata_s_and_the_source_has_no_second_literal() -> None:
    assert tessera.__version__ == importlib.metadata.version("tessera-dp")
    init = (ROOT / "src" / "tessera" / "__init__.py").read_text()
    assert _pyproject_version() not in init  # one literal: pyproject.toml's


def test_without_metadata_the_source_tree_s_pyproject_gives_the_version(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    monkeypatch.delattr(tessera, "__version__", raising=False)  # read again, lazily
    # as a source checkout (run from an installed wheel, the package is not beside it)
    monkeypatch.setattr(tessera, "__file__", str(ROOT / "src" / "tessera" / "__init__.py"))
    assert tessera.__version__ == _pyproject_version()
    # neither metadata nor a pyproject.toml of tessera-dp beside the package: said so
    monkeypatch.delattr(tessera, "__version__")
    monkeypatch.setattr(tessera, "__file__", str(tmp_path / "src" / "tessera" / "__init__.py"))
    assert tessera.__version__ == "0+unknown"
    monkeypatch.delattr(tessera, "__version__")


def test_versions_names_the_libraries_in_use() -> None:
    v = versions()
    assert v == {"tessera": tessera.__version__,
                 "opendp": importlib.metadata.version("opendp"),
                 "dp-accounting": importlib.metadata.version("dp-accounting"),
                 "python": platform.python_version()}
    v["opendp"] = "edited"  # a caller's copy: the next certificate is not affected
    assert versions()["opendp"] == importlib.metadata.version("opendp")


def test_the_certificate_states_its_software_and_the_schema_takes_it() -> None:
    release = answer(_frame(), WL, Budget.of(epsilon=1.0))  # OpenDP's secure noise
    cert = json.loads(json.dumps(release.certificate))
    assert cert["software"] == versions()
    assert verify_certificate(cert, WL).ok
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "certificate.schema.json").read_text())
    jsonschema.validate(cert, schema)
    for broken in ({k: v for k, v in cert["software"].items() if k != "opendp"},
                   cert["software"] | {"opendp": 16}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(cert | {"software": broken}, schema)
    # the report names them too
    page = render_report(release)
    assert f"opendp {cert['software']['opendp']}" in page


def test_verify_accepts_a_certificate_made_before_software_was_recorded() -> None:
    release = answer(_frame(), WL, Budget.of(rho=0.2))
    cert = json.loads(json.dumps(release.certificate))
    older = {k: v for k, v in cert.items() if k != "software"}
    older["digest"] = digest(older)
    assert verify_certificate(older, WL).ok, verify_certificate(older, WL).differences
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(older, json.loads((ROOT / "docs" / "certificate.schema.json").read_text()))
    # an edit of the versions shows in the digest
    edited = json.loads(json.dumps(cert))
    edited["software"]["opendp"] = "0.0.1"
    assert verify_certificate(edited, WL).differences == (
        "digest: the certificate was edited after it was made",)


def test_a_missing_optional_dependency_names_its_extra() -> None:
    with pytest.raises(TesseraError) as caught:
        require("tessera_no_such_module.sub", "plot", "drawing a figure")
    text = str(caught.value)
    assert "drawing a figure needs tessera_no_such_module" in text
    assert "pip install 'tessera-dp[plot]'" in text
    assert require("json", "plot", "x") is json
