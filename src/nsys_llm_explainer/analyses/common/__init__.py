"""Helpers shared by the analyses (grouped duration statistics)."""
