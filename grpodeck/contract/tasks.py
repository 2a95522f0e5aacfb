"""The task message from web to worker, and the deployment defaults both ends share.

The web app sends by name (it never imports the worker); the worker registers its task under the
same name. The message carries a single-use claim ticket, never the run's token.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Required, TypedDict

TRAIN_RUN = "grpodeck.train_run"
DEFAULT_QUEUE = "grpodeck"
# The workers' capability report: a Celery remote-control (inspect) command that the web app
# broadcasts and each worker answers with a ``WorkerCapabilities``. Remote control needs a broker
# with fanout exchanges (Redis): on the embedded SQLite broker no worker can report.
WORKER_CAPABILITIES = "grpodeck_capabilities"

# A fresh checkout runs with no server at all: data under var/ next to the code, and kombu's
# SQLAlchemy transport on a SQLite file as the broker (GRPODECK_BROKER_URL=redis://... in
# production).
ROOT = Path(__file__).resolve().parents[2]


def data_home(root: Path = ROOT) -> Path:
    """Where the embedded database, broker, runs, models and datasets live: ``GRPODECK_HOME``
    when set; ``var/`` in a checkout; else the user's data folder (``$XDG_DATA_HOME/grpodeck``,
    ``~/.local/share/grpodeck``), since an installed package's folder is no place for data."""
    if home := os.environ.get("GRPODECK_HOME"):
        return Path(home).expanduser().resolve()
    if (root / "pyproject.toml").is_file() and (root / "app").is_dir():
        return root / "var"
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "grpodeck"


VAR = data_home()


def private_folder(folder: Path) -> None:
    """Create ``folder`` readable by its owner only; the data home (``var/``) is made so even
    when it already existed (issue 33: a ``var/`` made earlier, by hand or by an older version,
    stayed 0755 around the database, the broker and the run folders). Any other existing folder
    is the user's own choice (a database path in their home folder) and is left as it is."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.resolve() == data_home().resolve():
        folder.chmod(0o700)
DEFAULT_BROKER_URL = f"sqla+sqlite:///{VAR / 'broker.db'}"


class TrainRunKwargs(TypedDict):
    """The keyword arguments of the ``TRAIN_RUN`` task."""

    run_id: int
    spec: dict[str, Any]
    report_url: str
    ticket: str


class Device(TypedDict):
    """One CUDA device a worker's training child would see (``torch.cuda``'s numbering)."""

    index: int
    name: str
    memory_bytes: int


class WorkerCapabilities(TypedDict, total=False):
    """What a worker's training child would find: a CUDA GPU, the vllm package, the device;
    and for runs on many devices (issue 26) the GPUs themselves, the deepspeed package and the
    CPU cores. The first three are always there; an older worker's report lacks the others
    (read them with ``.get``)."""

    cuda: Required[bool]
    vllm: Required[bool]
    device: Required[str]
    devices: list[Device]
    deepspeed: bool
    cpu_count: int


def private_broker_file(broker_url: str) -> None:
    """The embedded (SQLite) broker's file holds task messages: readable by its owner only.
    Whichever end opens the broker first creates it so."""
    if not broker_url.startswith("sqla+sqlite"):
        return
    path = Path(broker_url.split("///", 1)[1])
    private_folder(path.parent)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)


@contextmanager
def embedded_broker_lock(broker_url: str) -> Iterator[None]:
    """Hold an exclusive lock on the embedded (SQLite) broker's lock file; nothing elsewhere.

    Why: kombu's SQLAlchemy transport creates its tables and a queue's row with a get-or-create
    that is safe within one process only. The web app sending a run and a worker starting up
    both declare the queue, and the loser's IntegrityError (or "table already exists") stopped
    the worker's consumer: the run stayed queued. Each end declares the queue once under this
    lock before anything else touches the broker, so the row exists when the race would start.
    """
    if not broker_url.startswith("sqla+sqlite"):
        yield
        return
    import fcntl  # POSIX: imported here so the contract still imports where it is missing

    path = Path(broker_url.split("///", 1)[1])
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
