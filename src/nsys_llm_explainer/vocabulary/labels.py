"""How a thread's label is read back (the labels are written by :func:`model.names.thread_labels`): the rule the
findings and the report share."""


def label_shows_tid(label: str, tid: int) -> bool:
    """Whether a thread label already names the thread's tid (``name (tid N)``, ``name (pid P, tid N)``): a text that
    names the tid beside the label then leaves it out."""
    return label.endswith(f"tid {tid})")
