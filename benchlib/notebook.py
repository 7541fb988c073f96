"""Former home of the notebook display helpers; they live in :mod:`benchlib.analysis` now.

Kept so that ``from benchlib.notebook import ...`` goes on working; new code imports from
:mod:`benchlib.analysis`.
"""

from __future__ import annotations

from benchlib.analysis import (
    compare_valid,
    contracts_table,
    design_markdown,
    footnotes_markdown,
    provenance_markdown,
    show,
    status_table,
    verdict_sentences,
    verdict_table,
)

__all__ = ["compare_valid", "contracts_table", "design_markdown", "provenance_markdown", "show", "footnotes_markdown",
           "status_table", "verdict_sentences", "verdict_table"]
