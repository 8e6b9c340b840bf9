"""Benchmarks: ``python -m app bench index`` (per-frame culling cost of every index against
brute force) and ``python -m app bench paper`` (Shagam chapters 3 and 4)."""
