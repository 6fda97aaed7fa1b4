"""The CUDA API side: calls, synchronization, launches and CUDA graphs."""
