"""HTML dashboards built from a results directory's files (never from live objects); they open offline."""

from netsim.report.dashboard import build_figures, render_report, write_report

__all__ = ["build_figures", "render_report", "write_report"]
