"""Configuration: reading and validating option values and rule files into typed objects.

Everything that reads a file other than the trace (category rules, phase maps, presets) or parses an
option value lives here (:mod:`.values`: one check per kind of value); analyses receive the parsed objects
only. A bad value raises :class:`~nsys_llm_explainer.errors.OptionError` naming the option (``window``), which
the command line words with its flag (``--window``).
"""
