"""Study-specific helpers for the study notebooks (one module per study, only what a
notebook would otherwise have to repeat); the generic parts live in :mod:`benchlib.analysis`."""
