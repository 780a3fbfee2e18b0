"""User-facing text names no project history and no machine it was written on.

The README, every page under ``docs/`` and every module under ``src/`` are read by users, who
cannot look up a work session or an internal ticket number and do not have the authors' folders.
History belongs in git and in ``CHANGELOG.md`` (not scanned here); a docstring that needs a
measurement cites a section of ``docs/benchmarks.md`` or ``docs/theory.md`` instead.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: What must not appear, with the reason printed beside each hit.
FORBIDDEN: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bsessions? \d+", re.IGNORECASE), "a work session's number"),
    (re.compile(r"\bissues? #?\d+", re.IGNORECASE), "an internal issue number"),
    (re.compile(r"this workplace", re.IGNORECASE), "the authors' workplace"),
    (re.compile(r"this machine", re.IGNORECASE), "the authors' machine"),
    (re.compile(r"\.\./shared\b"), "a folder beside the authors' checkout"),
    (re.compile(r"(?<![\w.])/(?:work|tmp|home|root)/"), "an absolute path of one machine"),
)


def scanned_files(repo: Path = REPO) -> list[Path]:
    """README.md, docs/**/*.md and src/**/*.py (CHANGELOG.md is history and is left out)."""
    files = [repo / "README.md"]
    files += sorted((repo / "docs").rglob("*.md"))
    files += sorted((repo / "src").rglob("*.py"))
    return [f for f in files if f.is_file()]


def violations(files: list[Path], repo: Path = REPO) -> list[str]:
    """``file:line: reason: the line`` for every forbidden pattern found."""
    found: list[str] = []
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            for pattern, reason in FORBIDDEN:
                if pattern.search(line):
                    found.append(f"{path.relative_to(repo)}:{number}: {reason}: {line.strip()}")
    return found


def test_the_scan_covers_readme_docs_and_src() -> None:
    files = scanned_files()
    names = {f.relative_to(REPO).as_posix() for f in files}
    assert "README.md" in names
    assert "docs/benchmarks.md" in names
    assert "src/tessera/__init__.py" in names
    assert "CHANGELOG.md" not in names


def test_every_pattern_is_caught(tmp_path: Path) -> None:
    """Each pattern flags a line that has it and passes the same line without it."""
    bad = tmp_path / "bad.md"
    bad.write_text(
        "measured in session 14\n"
        "see issue #20 item 3\n"
        "in this workplace the data\n"
        "on this machine it took\n"
        "read ../shared/data/adult.csv\n"
        "python at /work/venv/bin/python\n"
        "cache in /tmp/pgm-np\n"
        "a plain line, a Spark session and the issue's wording stay\n",
        encoding="utf-8",
    )
    hits = violations([bad], tmp_path)
    assert [h.split(":")[1] for h in hits] == ["1", "2", "3", "4", "5", "6", "7"]


def test_user_facing_text_names_no_history_or_machine() -> None:
    hits = violations(scanned_files())
    assert not hits, (
        f"{len(hits)} line(s) name project history or a machine path; cite docs sections "
        "(docs/benchmarks.md, docs/theory.md §…) instead:\n" + "\n".join(hits))
