"""From stored runs to what people read: executed notebooks, HTML reports, the static site.

``notebooks`` (the study notebooks and their parameters), ``execute`` (one notebook executed
into a report, ``benchlib run``), ``report`` (a series of them, ``benchlib report``),
``kernel`` (the Jupyter kernel ``benchlib``), ``kernel_stop`` (a stop signal during an
execution), ``relay`` (progress lines and run folders from the kernel), ``html_export``
(nbconvert, offline), ``index`` (a reports folder's ``index.html``), ``closing_summary``
(outcomes and arms not run), ``history`` (every run's report and data kept), ``site``
(``benchlib publish``), ``census`` (how much a report decided) and ``templates`` (the
reports' nbconvert template).
"""
