"""nsys-llm-explainer: exact, actionable reports from Nsight Systems SQLite exports of LLM inference."""

__version__ = "0.2.0"
