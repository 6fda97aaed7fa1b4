"""The analysis window in words, as findings, compare and the timeline name it (docs/FINDINGS.md, "Kernels")."""


def window_name(method: str, detected: bool) -> str:
    """What the analysis window is, in words: "the steady window" only when the window rule judged it steady (it
    trimmed warm-up / tail, or found none to trim); a window kept whole because too little GPU activity ran to judge is
    "the whole capture", and a window the user chose is named by its option (nothing checked it is steady)."""
    if method == "override":
        return "the window set by --window"
    if method == "nvtx":
        return "the window set by --window-nvtx"
    return "the steady window" if method == "auto" or detected else "the whole capture"
