"""Writing a release's answers: CSV or Parquet, marked NOT PRIVATE when the noise was seeded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tessera.errors import TesseraError

if TYPE_CHECKING:
    from tessera.release.answer import Release

NOT_PRIVATE_MARK = "NOT PRIVATE: seeded test randomness, never publish"


def write_release(release: Release, path: Path) -> Path:
    """``.csv`` (a ``#`` comment line first when not private) or ``.parquet`` (the mark and the
    mechanism in the file's metadata)."""
    frame = release.to_frame()
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[b"tessera.mechanism"] = release.mechanism.describe().encode()
        meta[b"tessera.private"] = b"true" if release.private else b"false"
        if not release.private:
            meta[b"tessera.warning"] = NOT_PRIVATE_MARK.encode()
        pq.write_table(table.replace_schema_metadata(meta), path)
        return path
    if suffix in (".csv", ".tsv", ".txt"):
        with path.open("w", newline="") as f:
            if not release.private:
                f.write(f"# {NOT_PRIVATE_MARK}\n")
            frame.to_csv(f, index=False, sep="\t" if suffix == ".tsv" else ",")
        return path
    raise TesseraError(f"cannot write answers as {suffix or 'a file without suffix'}",
                       where=str(path), hint="use .csv or .parquet")
