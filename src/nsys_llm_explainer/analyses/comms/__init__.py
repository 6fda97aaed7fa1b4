"""Communication: NCCL collectives."""
