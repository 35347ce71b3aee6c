"""The embedded backend: one DuckDB file (or ``:memory:``), written by one process (the default)."""
