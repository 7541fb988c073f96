"""The published site of kept runs (``benchlib publish``): :func:`build_site` (``build``),
what it reads (``data``: :func:`read_studies`), the history plot's layout (``svg``) and the
jinja2 templates (``templates/``, package data)."""

from benchlib.publish.site.build import SiteBuild, build_site
from benchlib.publish.site.data import SiteRun, Study, VerdictRow, read_studies

__all__ = ["SiteBuild", "SiteRun", "Study", "VerdictRow", "build_site", "read_studies"]
