"""Which ``custom`` rewards a deployment allows: an allow-list, checked by web and worker alike.

A ``custom`` reward names a function the worker imports and calls. Left open, that is "call any
installed function" (``os:system``, ``subprocess:check_output``, ``builtins:eval``), so only
functions the deployment registered may be named:

* the Python entry point group ``grpodeck.rewards`` of any installed distribution, e.g. in a
  package's pyproject ``[project.entry-points."grpodeck.rewards"] shout = "mypkg.rewards:shout"``;
* ``GRPODECK_CUSTOM_REWARDS``: a comma list of exact ``module:function`` paths, or module
  prefixes (``mypkg.rewards`` allows ``mypkg.rewards:fn`` and ``mypkg.rewards.more:fn``, for
  functions DEFINED in that module: a name it imports, ``from subprocess import run``, is
  refused by the worker once it has imported the module, ``defined_in_module``).

The web app checks the list at launch and dry run (422 at the field); the worker checks it again,
against its own environment, before it imports anything. Listing reads the entry point metadata
only: nothing is imported here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.metadata import entry_points

from grpodeck.contract.kinds import import_path

ENTRY_POINT_GROUP = "grpodeck.rewards"
ENV_VAR = "GRPODECK_CUSTOM_REWARDS"


@dataclass(frozen=True)
class AllowedReward:
    """One allowed function: its ``module:function`` path, a short name, and who allowed it."""

    path: str
    name: str
    source: str


def _env_entries() -> list[str]:
    return [item.strip() for item in os.environ.get(ENV_VAR, "").split(",") if item.strip()]


def registered() -> list[AllowedReward]:
    """Every exact path allowed here (entry points, then the environment), each once."""
    found: dict[str, AllowedReward] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.attr:  # a bare module is not a function
            path = f"{ep.module}:{ep.attr}"
            found.setdefault(path, AllowedReward(path, ep.name, f"entry point {ENTRY_POINT_GROUP}"))
    for item in _env_entries():
        if ":" in item:
            found.setdefault(item, AllowedReward(item, item.rpartition(":")[2], ENV_VAR))
    return list(found.values())


def prefixes() -> list[str]:
    """Module prefixes from the environment (entries without ``:``)."""
    return [item.strip(".") for item in _env_entries() if ":" not in item]


def _under_prefix(path: str) -> bool:
    module, _, attr = path.partition(":")
    if attr.startswith("_"):  # a prefix opens a module's public functions, not its internals
        return False
    return any(module == p or module.startswith(p + ".") for p in prefixes())


def defined_in_module(path: str, fn: object) -> bool:
    """Whether ``fn`` (found at ``path``) was defined in that module, not imported into it: a
    prefix opens a module's own functions, and ``from subprocess import run`` in it must not
    open ``module:run``. An exact entry is the deployment's explicit choice and always holds."""
    if any(r.path == path for r in registered()):
        return True
    return getattr(fn, "__module__", None) == path.partition(":")[0]


def is_allowed(path: str) -> bool:
    """Whether ``path`` (already of the ``module:function`` shape) is on the allow-list."""
    return any(r.path == path for r in registered()) or _under_prefix(path)


def refusal(path: str) -> str:
    """Why ``path`` is refused, with what is allowed instead (the message a person sees)."""
    allowed = [r.path for r in registered()] + [f"{p}.*" for p in prefixes()]
    listed = ", ".join(allowed) if allowed else "none are registered"
    return (f"a custom reward this deployment registered ({ENTRY_POINT_GROUP} entry point or "
            f"{ENV_VAR}); {path!r} is not one. Allowed: {listed}")


def allowed_path(raw: object) -> str:
    """The parameter kind of ``custom.path``: the ``module:function`` shape, then the list."""
    path = import_path(raw)
    if not is_allowed(path):
        raise ValueError(refusal(path))
    return path
