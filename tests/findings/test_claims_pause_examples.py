"""The one-pause advice names what a pause may be by the workload fact (training / inference / unknown), from one table
(``advice_idle.PAUSE_EXAMPLES``); the trace-level cases are in test_claims_unsampled_launcher_gaps.py."""

from __future__ import annotations

from nsys_llm_explainer.findings.advice import advise
from nsys_llm_explainer.findings.advice_facts import FACT_DOMAINS

TRAINING = "(an epoch boundary, an evaluation, a checkpoint, a one-off stall)"
INFERENCE = "(a request's tokenization or other pre-processing, the server idle between requests, a one-off stall)"
UNKNOWN = ("(in training an epoch boundary, an evaluation or a checkpoint; in serving a request's tokenization or the "
           "server idle between requests; a one-off stall)")


def test_each_workload_gets_one_pause_line_with_its_words() -> None:
    """The finding lists every pause id (findings/idle.py); the workload fact keeps exactly one line, with that
    workload's examples."""
    ids = ("pause.one_gap", "pause.one_gap.inference", "pause.one_gap.unknown")
    want = {"training": TRAINING, "training with generation": TRAINING, "inference": INFERENCE, "unknown": UNKNOWN}
    assert set(want) == set(FACT_DOMAINS["workload"])
    for workload, words in want.items():
        (line,) = advise(ids, {"workload": workload})
        assert line.startswith("Most of this idle time is one pause (the largest gap in the finding's evidence), not "
                               f"a cost paid in every step: find what the program did then {words} and whether it "
                               "recurs;"), workload
