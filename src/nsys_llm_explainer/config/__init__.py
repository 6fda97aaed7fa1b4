"""Configuration: everything that reads a file other than the trace (category rules, phase maps, presets) or
parses an option value (:mod:`.values`); analyses receive the parsed objects only."""
