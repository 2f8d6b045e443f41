"""Chunked readers of source files, one module per format (CSV, Parquet, NumPy, LibSVM)."""
