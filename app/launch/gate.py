"""The one pre-launch check. Every entrance that stores a run to train (the form, ``POST
/api/runs``, ``/api/sweeps``, the smoke-test button, a dry run's "Launch", a smoke test's full
run) and a dry run itself ask the same questions here, through ``app.launch.launch``: before
it, each entrance kept its own list and the dry-run path checked only alert URLs (issue 55).

The checks reach out (DNS for alert hosts, a broadcast to the workers): call them from a
worker thread, never on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi.exceptions import RequestValidationError

from app.alerts import egress
from app.datasets.columns import missing_column_problem
from app.launch.capabilities import device_problems, vllm_problem
from grpodeck.contract.alerts import masked
from grpodeck.contract.spec import RunSpec


@dataclass(frozen=True)
class Refusal:
    """One reason a spec cannot run here, at its place in the spec (``("alerts", "urls", 0)``,
    ``("dataset",)``, ``("num_processes",)``)."""

    loc: tuple[str | int, ...]
    message: str

    @property
    def field(self) -> str:
        """The new-run form's field this refusal belongs to."""
        return "alert_urls" if self.loc[0] == "alerts" else str(self.loc[0])


class LaunchRefused(Exception):
    """A spec the deployment cannot run: nothing was stored."""

    def __init__(self, spec: RunSpec, refusals: list[Refusal]) -> None:
        super().__init__("; ".join(r.message for r in refusals))
        self.spec, self.refusals = spec, refusals

    def form_errors(self) -> dict[str, str]:
        """Field -> every reason for it, as the form shows them."""
        errors: dict[str, str] = {}
        for refusal in self.refusals:
            errors[refusal.field] = "; ".join(filter(None, (errors.get(refusal.field),
                                                            refusal.message)))
        return errors

    def validation_error(self, prefix: tuple[str, ...] = ("body",)) -> RequestValidationError:
        """The API's answer: a 422 naming each field (``prefix``: where the spec sits in the
        body), as a field error of the spec itself would."""
        return RequestValidationError([
            {"type": "value_error", "loc": (*prefix, *r.loc), "msg": r.message,
             "input": _input(self.spec, r.loc)} for r in self.refusals])


def _input(spec: RunSpec, loc: tuple[str | int, ...]) -> Any:
    """What the caller sent at ``loc``; an alert destination only masked (it may hold a
    secret)."""
    if loc[0] == "alerts":
        return masked(spec.alerts.urls[int(loc[2])])
    return getattr(spec, str(loc[0]))


def refusals(spec: RunSpec) -> list[Refusal]:
    """Every reason this deployment cannot run ``spec`` now (empty: it can): alert
    destinations the outbound URL policy refuses, an uploaded dataset missing a reward's
    column, vLLM with no worker for it, devices no reported worker has."""
    found = [Refusal(("alerts", "urls", i), why)
             for i, why in egress.refusals(spec.alerts.urls).items()]
    if (problem := missing_column_problem(spec)) is not None:
        found.append(Refusal(("dataset",), problem))
    if (problem := vllm_problem(spec)) is not None:
        found.append(Refusal(("use_vllm",), problem))
    found += [Refusal((name,), why) for name, why in device_problems(spec).items()]
    return found


def check(spec: RunSpec) -> None:
    """Raise :class:`LaunchRefused` with every reason, or return: the spec may run."""
    if found := refusals(spec):
        raise LaunchRefused(spec, found)
