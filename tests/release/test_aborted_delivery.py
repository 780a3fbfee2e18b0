"""What a release aborted after its charge says is true when it says it: which charge stays
spent (number, label, cost), the step that failed, and which requested files exist.

A ``deliver=`` callback (what ``tessera synth --method lp`` and the adaptive route deliver
through) runs while the requested files are still in their temporary files: when it fails,
none of them is put in place, so an aborted release has no requested file (docs/theory.md
§9.6); a rename that fails midway names the files already in place.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.errors import TesseraError
from tessera.release import Budget, Ledger, answer
from tessera.schema.domain import Domain
from tessera.synth import Synthesizer
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "sex": {"type": "categorical", "values": ["F", "M"]}}})
FRAME = pd.DataFrame({"age": [1, 2, 7, 4, 9, 0], "sex": ["F", "M", "F", "F", "M", "M"]})


def _book(path: Path) -> Ledger:
    return Ledger.init(path, total=3.0, definition="pure", neighbours="add-remove",
                       domain=DOMAIN, dataset="d")


def _fail(what: object) -> None:
    raise TesseraError("the callback failed")


def test_a_failing_deliver_callback_leaves_no_requested_file(tmp_path: Path) -> None:
    """The answers and certificate used to be renamed into place before the callback ran:
    they existed while the release was marked aborted and the hint said no file was written."""
    book = _book(tmp_path / "L.db")
    wl = Workload.from_sql(["age < 5", "sex = 'F'"], DOMAIN)
    with pytest.raises(TesseraError) as err:
        answer(FRAME, wl, Budget.of(epsilon=1.0), ledger=book, seed=1,
               output=tmp_path / "a.csv", certificate=tmp_path / "c.json", deliver=_fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.db"]  # no file, no temp file
    assert err.value.message == "the callback failed"
    assert err.value.hint == (
        "release #1 'release' (ε ≤ 1 alone) was charged before this failure (in the deliver "
        "callback, before the files were put in place) and is marked aborted in the ledger: "
        "its budget stays spent, and no requested file was written")
    assert [c.status for c in book.releases()] == ["aborted"]
    assert book.spent() == pytest.approx(1.0)  # the budget stays spent


def test_any_exception_of_the_callback_carries_the_same_account(tmp_path: Path) -> None:
    book = _book(tmp_path / "L.db")

    def crash(release: object) -> None:
        raise RuntimeError("a bug in the caller")

    with pytest.raises(RuntimeError) as err:
        answer(FRAME, Workload.from_sql(["age < 5"], DOMAIN), Budget.of(epsilon=1.0),
               ledger=book, seed=1, output=tmp_path / "a.csv", deliver=crash)
    assert not (tmp_path / "a.csv").exists()
    assert getattr(err.value, "__notes__", None) == [
        "(release #1 'release' (ε ≤ 1 alone) was charged before this failure (in the deliver "
        "callback, before the files were put in place) and is marked aborted in the ledger: "
        "its budget stays spent, and no requested file was written)"]


def test_a_synthesizer_deliver_callback_leaves_no_requested_file(tmp_path: Path) -> None:
    """The same for a synthesis run: its rows were in place before its callback failed."""
    book = _book(tmp_path / "L.db")
    wl = Workload.from_sql(["age < 5", "sex = 'F'"], DOMAIN)
    with pytest.raises(TesseraError) as err:
        Synthesizer("mwem", rounds=2, rows=20).fit(
            FRAME, wl, Budget.of(epsilon=1.0), ledger=book, seed=1, label="s",
            output=tmp_path / "s.csv", record=tmp_path / "r.json", deliver=_fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.db"]
    assert err.value.hint == (
        "run #1 's' (ε ≤ 1 alone) was charged before this failure (in the deliver callback, "
        "before the files were put in place) and is marked aborted in the ledger: its budget "
        "stays spent, and no requested file was written")
    assert [c.status for c in book.releases()] == ["aborted"]


# -- through the CLI -----------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    DOMAIN.save(tmp_path / "schema.yaml")
    (tmp_path / "w.sql").write_text("t: TRUE\na: age < 5\nb: sex = 'F'\n")
    rng = np.random.default_rng(0)
    pd.DataFrame({"age": rng.integers(0, 10, 200),
                  "sex": rng.choice(["F", "M"], 200)}).to_csv(tmp_path / "d.csv", index=False)
    _book(tmp_path / "L.db")
    return tmp_path


def _left(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()} - {"schema.yaml", "w.sql", "d.csv", "L.db"}


def test_synth_lp_failing_after_the_charge_names_the_charge(
        files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``synth --method lp`` runs its LP in the release's deliver callback: a failure there
    says which release stays spent, at which step, and that nothing was written."""
    import tessera.synth.lp as lp

    def infeasible(*args: object, **kwargs: object) -> None:
        raise TesseraError("the LP failed")

    monkeypatch.setattr(lp, "synthesize", infeasible)
    r = CliRunner().invoke(app, ["synth", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1",
                                 "--ledger", "L.db", "--method", "lp", "-o", "s.csv",
                                 "--record", "r.json", "--label", "lp"])
    assert r.exit_code == 2 and r.output.splitlines(keepends=True)[-1] == (
        "error: the LP failed (hint: release #1 'lp' (ε ≤ 1 alone) was charged before this "
        "failure (in the deliver callback, before the files were put in place) and is marked "
        "aborted in the ledger: its budget stays spent, and no requested file was written)\n"
    ), r.output
    assert [c.status for c in Ledger.open(files / "L.db").releases()] == ["aborted"]
    assert _left(files) == set()


def test_a_rename_failing_midway_names_the_files_in_place(
        files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The answers are renamed into place, then the certificate's target has become a
    directory: the error names it, says the answers file is there (complete), and no
    temporary file is left behind."""
    import tessera.release.certificate as certificate

    write = certificate.write_certificate

    def then_a_directory(doc: object, path: Path) -> Path:
        out = write(doc, path)  # type: ignore[arg-type]
        (files / "c.json").mkdir()  # where the finished file is to go
        return out

    monkeypatch.setattr(certificate, "write_certificate", then_a_directory)
    r = CliRunner().invoke(app, ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1",
                                 "--ledger", "L.db", "--label", "x", "-o", "a.csv",
                                 "--certificate", "c.json"])
    assert r.exit_code == 2 and r.output == (
        "error: c.json: cannot put the finished file in place: Is a directory (hint: release "
        "#1 'x' (ε ≤ 1 alone) was charged before this failure (putting the files in place) "
        "and is marked aborted in the ledger: its budget stays spent, and written before it "
        "(complete): a.csv; not written: c.json)\n"), r.output
    assert _left(files) == {"a.csv", "c.json"} and (files / "c.json").is_dir()
    assert [c.status for c in Ledger.open(files / "L.db").releases()] == ["aborted"]
