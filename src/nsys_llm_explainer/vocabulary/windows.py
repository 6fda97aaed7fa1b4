"""The analysis window in words, as findings, compare and the timeline name it (docs/FINDINGS.md, "Kernels")."""


def window_name(method: str, detected: bool, repeats: bool) -> str:
    """What the analysis window is, in words: "the steady window" only when the window rule judged it steady (it
    trimmed warm-up / tail, or found none to trim); a trimmed (auto-detected) window that holds no repeated steps
    (``repeats``: the report's ``window_repeats``, docs/FINDINGS.md window rules) may be one pass, not a steady state:
    "the auto-detected window"; a window kept whole — because too little GPU activity ran to judge, or with no
    warm-up to trim but no repeated steps in it (one pass, or steps not found) — is "the whole capture", and a window
    the user chose is named by its option (nothing checked it is steady)."""
    if method == "override":
        return "the window set by --window"
    if method == "nvtx":
        return "the window set by --window-nvtx"
    if method == "auto":
        return "the steady window" if repeats else "the auto-detected window"
    return "the steady window" if detected and repeats else "the whole capture"
