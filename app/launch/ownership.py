"""What a launch may take from another user's thing: its settings, never its secrets.

A run's alert destinations (Slack tokens, webhook paths, mail passwords) are its owner's. A
clone, a "Try this fix", a smoke test's full run or a dry run's "Launch" by anyone else starts
with the caller's own destinations or none, never the owner's (issue 55: a clone by another
user posted the masked URLs back and alerted into the owner's Slack).
"""

from __future__ import annotations

from typing import Any

from app.alerts.rules import rules_of, split_urls
from app.auth.identity import Identity, Owned
from grpodeck.contract.alerts import unmask


def own_spec(spec: dict[str, Any], source: Owned, identity: Identity) -> dict[str, Any]:
    """``spec`` (taken from ``source``) as ``identity`` may launch it: unchanged for the
    owner, without alert destinations for anyone else."""
    alerts = spec.get("alerts")
    if identity.owns(source) or not isinstance(alerts, dict) or not alerts.get("urls"):
        return spec
    return {**spec, "alerts": {**alerts, "urls": []}}


def with_parent_secrets(form: dict[str, str], parent: Owned | None, parent_spec: dict | None,
                        identity: Identity) -> dict[str, str]:
    """The clone's form shows its parent's alert URLs masked: a masked URL left as it was
    stands for the parent's full one (the form sent back on an error keeps the masked text).
    Only for the parent's owner: anyone else's masked text stays masked, and the form refuses
    it as masked."""
    if parent is None or not identity.owns(parent):
        return form
    urls = unmask(split_urls(form.get("alert_urls")), rules_of(parent_spec).urls)
    return {**form, "alert_urls": " ".join(urls)}


def withheld_alerts(values: dict[str, Any], parent: Owned | None,
                    identity: Identity) -> dict[str, Any]:
    """A clone of another user's run starts with an empty destinations field, and the form
    says why (``alerts_withheld``: the parent's id)."""
    if parent is None or identity.owns(parent) or not values.get("alert_urls"):
        return values
    return {**values, "alert_urls": "", "alerts_withheld": parent.id}
