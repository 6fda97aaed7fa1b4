"""Diagnosis analyses (issue 3) run after the core analyses; results go to ``report.extra``."""

from __future__ import annotations


def run_diagnosis(report) -> None:
    """Populate ``report.extra`` with diagnosis results (categories, steps, accounting, …)."""
    return None
