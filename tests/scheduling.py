"""How ``make test`` spreads the suite over xdist workers: tests that share a live resource (a
stack, a browser's server, built wheels) run on one worker, so each resource starts once;
everything else spreads freely.

The grouping comes from pytest's own fixture information, not from folders: two tests share a
group when they use the same instance of a session- or module-scoped fixture defined in the
suite (a stack per backend is two instances, so the embedded and the PostgreSQL tests of a
folder may run side by side). Each worker computes the groups after collection and writes them
to a file the controller reads when it schedules (the controller itself collects nothing).
Fixtures of the root conftest (migrated database templates) and of plugins (the browser) are
cheap to make once per worker and group nothing.

The heaviest scopes go first, so that the one-test scopes fill in around them at the end: a
live test (marked ``live`` by tests/conftest.py) weighs as much as LIVE_WEIGHT other tests
(a live test waits for processes and trainings: tens of seconds; most others take well under
one). xdist's own order, by number of tests, put a folder of quick template tests before the
bench runs.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

SHARED_SCOPES = ("session", "package", "module", "class")
# Fixtures defined here (the root conftest) or by plugins ("") are made once per worker anyway.
UNGROUPED_BASEIDS = ("", "tests")
# Shared fixtures cheap enough to make once on each worker that needs them: they group nothing.
PER_WORKER = {"tests/e2e::browser_type_launch_args"}  # chromium's command line
LIVE_WEIGHT = 30


def shared_instances(item: pytest.Item) -> list[str]:
    """The shared fixture instances ``item`` uses: ``baseid::name[param]`` for each session- to
    class-scoped fixture the suite defines below the root conftest."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    params = getattr(getattr(item, "callspec", None), "params", {})
    found = []
    for name in item.fixturenames:  # type: ignore[attr-defined]
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixturedef = defs[-1]
        if fixturedef.scope in SHARED_SCOPES and fixturedef.baseid not in UNGROUPED_BASEIDS:
            param = f"[{params[name]}]" if name in params else ""
            if f"{fixturedef.baseid}::{name}" not in PER_WORKER:
                found.append(f"{fixturedef.baseid}::{name}{param}")
    return found


def groups_of(items: list[pytest.Item]) -> dict[str, str]:
    """nodeid -> group name for the tests that share a fixture instance with another test
    (transitively); a test that shares nothing is left out (it is a scope of its own)."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    uses = {item.nodeid: shared_instances(item) for item in items}
    for instances in uses.values():
        for other in instances[1:]:
            parent[find(other)] = find(instances[0])
    members: dict[str, list[str]] = defaultdict(list)
    for nodeid, instances in uses.items():
        if instances:
            members[find(instances[0])].append(nodeid)
    return {nodeid: f"group:{root}" for root, nodeids in members.items() for nodeid in nodeids}


GROUPS_DIR = pytest.StashKey[str]()
WORKER_KEY = "grpodeck_groups_dir"


def distributed(config: pytest.Config) -> bool:
    return config.getoption("dist", "no") == "loadscope"


def make_groups_folder(config: pytest.Config) -> None:
    """The controller's folder where the workers write their groups (before any starts)."""
    if distributed(config) and not hasattr(config, "workerinput"):
        config.stash[GROUPS_DIR] = tempfile.mkdtemp(prefix="grpodeck-groups-")


def forget_groups(config: pytest.Config) -> None:
    folder = config.stash.get(GROUPS_DIR, None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def tell_worker(node: Any) -> None:
    """The controller hands each worker the folder (xdist's ``workerinput``)."""
    folder = node.config.stash.get(GROUPS_DIR, None)
    if folder:
        node.workerinput[WORKER_KEY] = folder


def make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if not distributed(config) or GROUPS_DIR not in config.stash:
        return None
    return SharedFixtureScheduling(config, log, config.stash[GROUPS_DIR])


def write_groups(session: pytest.Session) -> None:
    """Written by each worker once it has collected (before it tells the controller so): the
    groups, and the weight of each test that weighs more than one."""
    workerinput = getattr(session.config, "workerinput", None)
    if not workerinput or WORKER_KEY not in workerinput:
        return
    items = session.items
    heavy = {item.nodeid: LIVE_WEIGHT for item in items if item.get_closest_marker("live")}
    path = Path(workerinput[WORKER_KEY]) / f"{workerinput['workerid']}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"groups": groups_of(items), "weights": heavy}))
    os.replace(tmp, path)


class SharedFixtureScheduling(LoadScopeScheduling):
    """xdist's ``loadscope``, with a scope per shared-fixture group instead of per module."""

    def __init__(self, config: pytest.Config, log: Any, folder: str) -> None:
        super().__init__(config, log)
        self.folder = Path(folder)
        self.groups: dict[str, str] | None = None
        self.weights: dict[str, int] = {}
        self.ordered = False

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:  # every worker has written its file before schedule() runs
            written = sorted(self.folder.glob("*.json"))
            found = json.loads(written[0].read_text()) if written else {}
            self.groups, self.weights = found.get("groups", {}), found.get("weights", {})
        return self.groups.get(nodeid, nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        if not self.ordered:  # the first assignment: the queue is complete, nothing taken yet
            units = sorted(self.workqueue.items(),  # stable: ties keep the collection's order
                           key=lambda unit: -sum(self.weights.get(n, 1) for n in unit[1]))
            self.workqueue.clear()
            self.workqueue.update(units)
            self.ordered = True
        super()._assign_work_unit(node)
