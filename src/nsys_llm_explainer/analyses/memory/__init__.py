"""Memory: copies, allocation traffic and Unified Memory."""
