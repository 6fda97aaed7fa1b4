"""Model steps and phases: detection, per-step metrics, per-step synchronization."""
