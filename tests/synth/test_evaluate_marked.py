"""``evaluate`` marks what it prints and draws NOT PRIVATE (issue 19, item 15): the errors are
computed from exact answers on the real data. And the package shows only public names:
``tessera.evaluate`` is exported, ``dir(tessera)`` lists no ``Any``/``TYPE_CHECKING``/
``importlib``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from typer.testing import CliRunner

import tessera
from tessera.cli.main import app
from tessera.data.counts import NOT_PRIVATE
from tests.synth.test_synthesizer import QUERIES, SCHEMA


@pytest.fixture()
def files(tmp_path: Path, data: pd.DataFrame) -> dict[str, Path]:
    (tmp_path / "s.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("\n".join(QUERIES) + "\n")
    data.to_csv(tmp_path / "real.csv", index=False)
    data.sample(80, random_state=2).to_csv(tmp_path / "synth.csv", index=False)
    return {"schema": tmp_path / "s.yaml", "workload": tmp_path / "w.sql",
            "real": tmp_path / "real.csv", "synth": tmp_path / "synth.csv", "dir": tmp_path}


@pytest.fixture()
def data() -> pd.DataFrame:
    rng = np.random.default_rng(0)  # not-privacy-noise: test data
    n = 300
    return pd.DataFrame({"sex": rng.choice(["F", "M"], n), "age": rng.integers(18, 26, n),
                         "income": np.round(rng.uniform(0, 99.5, n), 1),
                         "ok": rng.random(n) < 0.5})


def test_item15_evaluate_marks_stdout_and_plot_not_private(files: dict[str, Path]) -> None:
    png = files["dir"] / "errors.png"
    res = CliRunner().invoke(app, ["evaluate", str(files["real"]), str(files["synth"]),
                                   str(files["workload"]), "--schema", str(files["schema"]),
                                   "--plot", str(png)])
    assert res.exit_code == 0, res.output
    mark = f"{NOT_PRIVATE} (errors against the real data)"
    assert res.stdout.splitlines()[0] == mark          # stdout alone carries the mark
    image = Image.open(png)
    assert image.info["Description"] == mark            # in the file …
    top = np.asarray(image.convert("RGB"))[:30].astype(int)
    red = (top[..., 0] > 150) & (top[..., 1] < 80) & (top[..., 2] < 80)
    assert red.sum() > 50                               # … and drawn, in red, above the panels


def test_item15_tessera_exports_evaluate_and_only_public_names() -> None:
    from tessera.synth.evaluate import evaluate

    assert tessera.evaluate is evaluate and "evaluate" in tessera.__all__
    names = dir(tessera)
    assert names == sorted(tessera.__all__)
    assert not {"Any", "TYPE_CHECKING", "importlib", "annotations"} & set(names)
