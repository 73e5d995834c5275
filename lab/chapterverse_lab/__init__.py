"""Evaluation and benchmarks: retrieval metrics (``evaluate``), answer runs and calibration
(``answer_eval``), result files and the README tables (``results``, ``report``), latency, scale and
index-sizing benchmarks (``bench``, ``scale``, ``hnsw_sizing``, ``cli_bench``) and the reader's
training questions (``reader_data/``). Nothing in search or answer code imports this package."""
