"""Trace facts: what was captured, the analysis window, the facts advice depends on."""
