"""Configuration: reading and validating option values and rule files into typed objects.

Everything that reads a file other than the trace (category rules, phase maps, presets) or parses an
option value lives here (:mod:`.values`: one check per kind of value); analyses receive the parsed objects
only. A bad value raises :class:`~nsys_llm_explainer.errors.OptionError` naming the option (``window``), which
the command line words with its flag (``--window``).
"""

from .categories import CategoryRules, PresetRules, UserRules, build_rules, load_rules, read_rules_file
from .phase_map import PhaseMap, build_phase_map, parse_phase_map, read_phase_map_file
from .window import check_window, parse_window

__all__ = [
    "CategoryRules",
    "PhaseMap",
    "PresetRules",
    "UserRules",
    "build_phase_map",
    "build_rules",
    "check_window",
    "load_rules",
    "parse_phase_map",
    "parse_window",
    "read_phase_map_file",
    "read_rules_file",
]
