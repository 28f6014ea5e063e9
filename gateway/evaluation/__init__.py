"""Evaluation of a results file: paired metrics with anchor-clustered bootstrap intervals, the tables, the
plots, and the report (Markdown, JSON and HTML rendered from the same table objects)."""
