"""A name for a run an MLflow client started without one (``mlflow.start_run()``, TRL's
``report_to="mlflow"`` with no ``run_name``).

Why: MLflow's own server names such a run ``adjective-animal-NNN`` (its ``name_utils``), and
users know their runs by those names; the Deck used to call every one "mlflow run", so a list
of them could not be told apart. Same shape here, with words of our own, and a name no run of
the Deck has yet (a few tries; a clash after them only costs readability, never a run).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

ADJECTIVES = (
    "agile", "amber", "bold", "brave", "bright", "calm", "clever", "cosmic", "crisp", "daring",
    "dapper", "eager", "fancy", "fearless", "gentle", "glad", "golden", "grand", "happy",
    "hasty", "honest", "humble", "jolly", "keen", "kind", "lively", "lucky", "merry", "mighty",
    "nimble", "noble", "polite", "proud", "quick", "quiet", "rapid", "shy", "silver", "smooth",
    "snappy", "sunny", "swift", "tidy", "vivid", "warm", "wise", "witty", "zesty",
)
ANIMALS = (
    "ant", "badger", "bat", "bear", "bee", "bison", "boar", "carp", "cat", "cod", "crab",
    "crane", "crow", "deer", "dog", "dove", "eel", "elk", "finch", "fox", "frog", "goat",
    "gull", "hare", "hawk", "hen", "heron", "ibis", "jay", "koala", "lark", "lion", "lynx",
    "mole", "moth", "newt", "otter", "owl", "panda", "quail", "ram", "seal", "shrew", "slug",
    "snail", "swan", "toad", "trout", "whale", "wolf", "wren", "yak", "zebra",
)
TRIES = 8


def generated_name() -> str:
    """``adjective-animal-NNN`` (NNN: 0-999), as MLflow's server names an unnamed run."""
    return (f"{secrets.choice(ADJECTIVES)}-{secrets.choice(ANIMALS)}-"
            f"{secrets.randbelow(1000)}")


def unused_name(taken: Callable[[str], bool]) -> str:
    """A generated name for which ``taken`` is false, if one turns up in ``TRIES`` draws
    (2.5 million names: a clash is rare); else the last one drawn."""
    name = generated_name()
    for _ in range(TRIES - 1):
        if not taken(name):
            break
        name = generated_name()
    return name
