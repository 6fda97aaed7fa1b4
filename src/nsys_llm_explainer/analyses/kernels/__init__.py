"""Kernels: per-name statistics, traits (what a kernel is) and categories."""
