"""Words of the findings: per idle-cause kind, its title, many-details title, detail word and stand-in noun come
from the kind table (:data:`vocabulary.cause_kinds.CAUSE_KINDS`, with its advice lines); this module adds the two
variants a kind's finding may take instead — back-to-back queued kernels and Unified-Memory copies — and gives every
finding one mapping to read."""

from __future__ import annotations

from typing import Any, Dict

from ..vocabulary.cause_kinds import CAUSE_KINDS

#: the variants of a kind's finding: titles and the advice ids they give instead of the kind's
VARIANTS: Dict[str, Dict[str, Any]] = {
    "copy_unified": {
        "many": "Unified-Memory migrations and copies keep the kernels waiting: {share:.1f} % of the window",
        "title": "Unified-Memory migrations (`{what}`) keep the kernels waiting: {share:.1f} % of the window",
        "by": "copy kind",
        "advice": ["um.see_finding", "um.prefetch", "um.advise"]},
    "queued_latency": {
        "title": "Per-kernel launch latency: idle between back-to-back queued kernels ({share:.1f} % of the window)",
        "advice": ["queued_latency.fuse", "queued_latency.compile", "compiled.graph_breaks"]},
}

#: per kind (and variant): ``title``, ``many`` (title when no detail holds half the kind), ``by``, ``noun``,
#: ``advice`` (variants only); keys left out where the kind has none
CAUSE_TEXT: Dict[str, Dict[str, Any]] = {
    **{k.name: {key: v for key, v in (("title", k.title), ("many", k.title_many), ("by", k.by), ("noun", k.noun))
                if v}
       for k in CAUSE_KINDS},
    **VARIANTS,
}
