"""Apache Spark backend of the data layer (placeholder; filled in by issue #12)."""
