"""Where a finding leads: the run page at the finding, the charts zoomed to its step range and
the rollouts at its last step. One builder for the run page's findings and for the alerts (page,
messages and JSON), so a finding and its alert always lead to the same places."""

from __future__ import annotations


def finding_links(run_id: int, finding_id: int | None, first_step: int, last_step: int,
                  base_url: str = "") -> dict[str, str]:
    """``url``: the run page scrolled to the finding (its range is shaded on the charts);
    ``chart_url``: every chart zoomed to ``first_step``-``last_step`` (static/charts.js reads
    ``?steps=A-B``); ``rollouts_url``: the rollout inspector at ``last_step``, or, when no
    rollouts were captured there, at the captured step nearest it inside the range
    (``within=A-B``, app/rollouts/views.py) or else nearest at all."""
    run = f"{base_url.rstrip('/')}/runs/{run_id}"
    anchor = f"#finding-{finding_id}" if finding_id else "#findings-panel"
    return {"url": run + anchor,
            "chart_url": f"{run}?steps={first_step}-{last_step}#charts-panel",
            "rollouts_url": f"{run}/rollouts?step={last_step}&within={first_step}-{last_step}"}
