"""Strategies: what to measure so that a workload's answers have the least expected error
(docs/theory.md §10). Pure math from public inputs only — no data, no noise."""
