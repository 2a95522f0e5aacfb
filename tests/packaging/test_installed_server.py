"""The server wheel installed (not editable) into a fresh venv outside the checkout: it finds
its migrations, templates and static files in the package, keeps its data under GRPODECK_HOME,
and migrates, serves, works and schedules until a tiny run has trained end to end."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.core.config import ROOT
from tests.conftest import tiny_spec
from tests.packaging.conftest import Wheels, clean_env
from tests.stack import _signal_group, free_port

DATA = ("app/_data/alembic.ini", "app/_data/migrations/env.py", "app/_data/templates/base.html",
        "app/_data/static/app.js", "app/_data/node_modules/htmx.org/dist/htmx.min.js",
        "app/_data/node_modules/plotly.js-cartesian-dist-min/plotly-cartesian.min.js",
        "app/_data/node_modules/swagger-ui-dist/swagger-ui-bundle.js")


def names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {n for n in z.namelist() if ".dist-info/" not in n}


def test_the_server_wheel_carries_its_data_and_the_client_wheel_the_shared_package(
        wheels: Wheels) -> None:
    server, client = names(wheels.server), names(wheels.client)
    assert set(DATA) <= server
    assert not {n for n in server | client if "__pycache__" in n}
    assert "grpodeck/contract/wire.py" in client and "grpodeck/client/sender.py" in client
    assert not {n for n in server if n.startswith("grpodeck/")}  # one owner per file
    assert "grpodeck/__init__.py" not in client  # a namespace package: both distributions fit
    assert {n.split("/")[0] for n in server} == {"app", "worker"}
    assert "worker/sandbox_mounts.py" in server  # read as text by the sandbox, never imported


class Deck:
    """grpodeck migrate / serve / worker / scheduler from a venv's own ``bin``, in a cwd that
    is not the checkout, with nothing of the checkout on the import path."""

    def __init__(self, venv: Path, home: Path) -> None:
        self.venv, self.home, self.port = venv, home, free_port()
        self.cwd = home.parent / "elsewhere"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.env = clean_env(GRPODECK_HOME=str(home), GRPODECK_QUEUE=f"pkg-{uuid.uuid4().hex[:8]}",
                             GRPODECK_PUBLIC_URL=f"http://127.0.0.1:{self.port}",
                             HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
        for key in ("GRPODECK_DATABASE_URL", "GRPODECK_BROKER_URL", "GRPODECK_RUNS_DIR",
                    "GRPODECK_DATASETS_DIR", "GRPODECK_MODELS_DIR"):
            self.env.pop(key, None)  # the defaults, under GRPODECK_HOME
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.venv / "bin" / args[0]), *args[1:]], cwd=self.cwd,
                              env=self.env, capture_output=True, text=True, timeout=300,
                              check=False)

    def start(self, name: str, *args: str) -> None:
        with (self.cwd / f"{name}.log").open("wb") as log:
            self.procs[name] = subprocess.Popen(
                [str(self.venv / "bin" / "grpodeck"), *args], cwd=self.cwd, env=self.env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self, name: str) -> str:
        return (self.cwd / f"{name}.log").read_text(errors="replace")[-4000:]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.procs["web"].poll() is None, self.log("web")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.3)
        raise AssertionError(self.log("web"))

    def stop(self) -> None:
        for proc in self.procs.values():
            _signal_group(proc, 15)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(proc, 9)
                proc.wait(timeout=30)


@pytest.fixture
def deck(server_venv: Path, tmp_path: Path) -> Iterator[Deck]:
    deck = Deck(server_venv, tmp_path / "home")
    try:
        yield deck
    finally:
        deck.stop()


def test_the_installed_package_is_the_one_running(deck: Deck) -> None:
    found = deck.run("python", "-c", "import app, worker, grpodeck.contract.wire as w; "
                     "from app.core.resources import data_path; "
                     "print(app.__file__, worker.__file__, w.__file__, data_path('migrations'))")
    assert found.returncode == 0, found.stderr
    for path in found.stdout.split():
        assert path.startswith(str(deck.venv)), path
        assert not path.startswith(str(ROOT)), path


def test_a_wheel_outside_the_checkout_migrates_serves_and_trains_a_tiny_run(deck: Deck) -> None:
    migrated = deck.run("grpodeck", "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert (deck.home / "grpodeck.db").is_file()  # the embedded database, under GRPODECK_HOME
    deck.start("web", "serve", "--port", str(deck.port))
    deck.start("worker", "worker")
    deck.start("scheduler", "scheduler")
    deck.wait_ready()
    page = httpx.get(f"{deck.url}/runs", timeout=10)
    assert page.status_code == 200, page.text[-2000:]
    for src in re.findall(r'src="(/static/[^"]+)"', page.text):  # app.js, htmx from the wheel
        assert httpx.get(f"{deck.url}{src}", timeout=10).status_code == 200, src
    assert httpx.get(f"{deck.url}/static/swagger/swagger-ui.css", timeout=10).status_code == 200
    launched = httpx.post(f"{deck.url}/api/runs", json=tiny_spec(name="from-wheel", max_steps=2),
                          timeout=30)
    assert launched.status_code == 201, launched.text
    run_id = launched.json()["id"]
    deadline = time.monotonic() + 400
    while (run := httpx.get(f"{deck.url}/api/runs/{run_id}", timeout=10).json())["status"] not in {
            "succeeded", "failed", "cancelled"}:
        assert time.monotonic() < deadline, deck.log("worker")
        time.sleep(1)
    assert run["status"] == "succeeded", (run, deck.log("worker"))
    series = httpx.get(f"{deck.url}/api/runs/{run_id}/metrics", timeout=10).json()
    assert series["reward"]["steps"] == [1, 2]
    assert (deck.home / "runs" / str(run_id)).is_dir()  # the worker's folders: GRPODECK_HOME too
    # A dry run after the run: its pool process has the training stack imported, so the
    # installed package's sampling child is forked warm (worker.dry_run from site-packages).
    posted = httpx.post(f"{deck.url}/api/dry-runs", params={"prompts": 2}, timeout=30,
                        json=tiny_spec(name="dry-from-wheel"))
    assert posted.status_code == 202, posted.text
    while (dry := httpx.get(f"{deck.url}/api/dry-runs/{posted.json()['id']}",
                            timeout=10).json())["status"] == "queued":
        assert time.monotonic() < deadline, deck.log("worker")
        time.sleep(0.5)
    assert dry["status"] == "done", (dry, deck.log("worker"))
    assert dry["result"]["groups"] == 2 and dry["rewards"]["length_target"]["count"] == 8
    assert deck.procs["scheduler"].poll() is None, deck.log("scheduler")


def test_the_wheels_sandbox_runs_a_program_in_its_namespaces(deck: Deck) -> None:
    """The sandbox's mount set-up ships in the wheel and works from a venv outside the checkout:
    a program runs, sees its root read-only, and the host's namespaces mode is the one chosen."""
    program = ("import os; os.makedirs('/tmp/x'); "
               "print(os.statvfs('/').f_flag & os.ST_RDONLY, os.path.isdir('/tmp/x'))")
    done = deck.run("python", "-c", "from worker import sandbox; "
                    f"r = sandbox.run_python({program!r}); "
                    "print(r.status, r.stdout.strip(), sandbox.isolation().namespaces, r.stderr)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "1", "True", "True"], done.stdout


def test_a_wheel_worker_ends_within_its_grace_after_sigterm(deck: Deck) -> None:
    """Mid-run, SIGTERM to the worker's main process: what ``docker stop`` sends this image's
    PID 1 (``grpodeck worker`` execs Celery) and ``grpodeck up`` sends its child. Celery's warm
    shutdown waited for the run (hours); issue 33 saw a wheel's worker alive 17 minutes after
    SIGTERM. It now ends within ``GRPODECK_SHUTDOWN_GRACE_SECONDS`` (worker/shutdown.py).
    SIGTERM to the whole group (systemd) ended it in seconds here before that change too."""
    grace = 20
    deck.env["GRPODECK_SHUTDOWN_GRACE_SECONDS"] = str(grace)
    assert deck.run("grpodeck", "migrate").returncode == 0
    deck.start("web", "serve", "--port", str(deck.port))
    deck.start("worker", "worker")
    deck.wait_ready()
    launched = httpx.post(f"{deck.url}/api/runs", timeout=30,
                          json=tiny_spec(name="stopped", max_steps=100_000))
    assert launched.status_code == 201, launched.text
    deadline = time.monotonic() + 400
    while not (httpx.get(f"{deck.url}/api/runs/{launched.json()['id']}", timeout=10)
               .json()["step"] or 0):
        assert time.monotonic() < deadline, deck.log("worker")
        time.sleep(1)
    worker = deck.procs["worker"]
    worker.send_signal(15)
    stopped_at = time.monotonic()
    try:
        worker.wait(timeout=grace + 15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"worker alive {grace + 15} s after SIGTERM:\n{deck.log('worker')}")
    assert time.monotonic() - stopped_at < grace + 15
