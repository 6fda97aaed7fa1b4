"""NVTX: ranges, the range tree, and kernels attributed to ranges."""
