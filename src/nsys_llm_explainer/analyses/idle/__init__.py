"""GPU busy/idle and where the idle time went (causes, pieces, timeline bins, CPU samples)."""
