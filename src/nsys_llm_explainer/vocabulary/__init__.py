"""Vocabularies shared by every layer (pure data: imports nothing from the package): the idle-cause kinds."""
