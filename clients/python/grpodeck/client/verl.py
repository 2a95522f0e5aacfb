"""verl's tracking backend interface for GRPO Deck: ``DeckTracking`` logs what verl's
``Tracking`` hands its backends (``log(data, step)``, ``finish()``) through ``grpodeck.client.Run``.

verl's ``Tracking`` only builds the backends it names (``trainer.logger``), so a verl user adds
this one to its ``logger`` dict after building it::

    tracking = Tracking(project_name, experiment_name, default_backend=["console"], config=cfg)
    tracking.logger["grpodeck"] = DeckTracking(project_name, experiment_name, config=cfg)

``Tracking.finish`` calls only the backends it knows, so the run is also finished at interpreter
exit (``atexit``) when nobody called ``finish``; ``finish`` twice is harmless.
"""

from __future__ import annotations

import atexit
from typing import Any

from grpodeck.client.run import Run, init


def _plain(config: Any) -> dict[str, Any]:
    """An OmegaConf/dataclass/dict config as a plain dict (nested dicts are flattened later)."""
    if config is None:
        return {}
    if isinstance(config, dict):
        return config
    try:
        from omegaconf import OmegaConf  # verl's configs are OmegaConf DictConfigs

        return OmegaConf.to_container(config, resolve=True)  # type: ignore[return-value]
    except (ImportError, ValueError):
        return dict(vars(config)) if hasattr(config, "__dict__") else {}


class DeckTracking:
    """One verl experiment reported to GRPO Deck as a run named ``experiment_name`` in the group
    ``project_name`` (keyword arguments go to ``grpodeck.client.init``). verl's names
    (``critic/score/mean``, ``actor/entropy``, ...) are read as the Deck's (``reward``,
    ``entropy``, ...) by the server's verl vocabulary; ``metric_map`` adds your own keys."""

    def __init__(self, project_name: str, experiment_name: str, config: Any = None,
                 **options: Any) -> None:
        options.setdefault("group", project_name)
        options.setdefault("vocabulary", "verl")  # read as the Deck's names from the first step
        self.run: Run = init(name=experiment_name, config=_plain(config), **options)
        atexit.register(self.finish)

    @property
    def should_stop(self) -> bool:
        """Cancelled on the Deck (or stopped by its guard rail): a loop may check it."""
        return self.run.should_stop

    def log(self, data: dict[str, Any], step: int) -> None:
        """verl's ``data`` is a flat dict of names ("actor/entropy") to numbers."""
        self.run.log(data, step=step)

    def finish(self, exit_code: int = 0) -> str | None:
        atexit.unregister(self.finish)
        return self.run.finish("succeeded" if exit_code == 0 else "failed",
                               None if exit_code == 0 else f"exit code {exit_code}")
