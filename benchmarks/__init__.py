"""Benchmarks of attsvm (outside the library): `python -m benchmarks.bench` (the GD engine
against a numpy loop) and `python -m benchmarks.bench_experiments` (every experiment)."""
