"""From stored runs to what people read: executed notebooks, HTML reports, the static site.

``report`` (papermill execution and HTML export, the index), ``kernel`` (the Jupyter kernel
``benchlib``), ``history`` (every run's report and data kept), ``site`` (``benchlib
publish``), ``census`` (how much a report decided) and ``templates`` (the reports' nbconvert
template).
"""
