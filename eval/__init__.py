"""Offline evaluation and benchmarks for abstracts-qa.

``eval.metrics`` (pure metric functions), ``eval.dataset`` (question sets),
``eval.runner`` (runs a set through the engine), ``eval.report`` (report
folder: results.jsonl, summary.json, report.md, plots), ``eval.compare``,
``eval.ablate``, ``eval.bench`` and ``eval.cli`` (the ``aqa eval`` / ``aqa
bench`` subcommands). Nothing here is imported by the engine.
"""
