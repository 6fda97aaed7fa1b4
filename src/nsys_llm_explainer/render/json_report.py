"""``report.json`` builder: re-exported from :mod:`serialize` (the one serialiser)."""

from __future__ import annotations

from ..serialize import SCHEMA_VERSION, plain, report_dict

build_json = report_dict

__all__ = ["SCHEMA_VERSION", "build_json", "plain", "report_dict"]
