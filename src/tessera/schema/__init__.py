"""The public schema (docs/theory.md §1): what values each attribute may take.

* :mod:`~tessera.schema.intervals`: sets of integer intervals (the values a predicate allows);
* :mod:`~tessera.schema.attributes`: attribute kinds (categorical, integer range, binned,
  boolean) and their codes;
* :mod:`~tessera.schema.domain`: the domain (ordered attributes), read from and written to
  YAML/JSON.

The schema is public and never derived from the data (``tessera schema infer`` drafts one and
says so).
"""
