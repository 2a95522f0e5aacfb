"""``GET /api/rewards``: the reward functions a run may name, and the custom ones allowed here.

The ``custom`` reward only takes a function this deployment registered
(``grpodeck.contract.custom_rewards``); this lists them so a client (and the new-run form) can
offer them instead of letting a person guess."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from grpodeck.contract import custom_rewards
from grpodeck.contract.catalog import REWARDS, RewardInfo

router = APIRouter(prefix="/api/rewards", tags=["rewards"])


def _reward_json(reward: RewardInfo) -> dict[str, Any]:
    return {"name": reward.name, "label": reward.label, "help": reward.help,
            "params": [{"name": p.name, "default": p.default, "help": p.help,
                        "minimum": p.minimum, "maximum": p.maximum} for p in reward.params]}


def custom_listing() -> dict[str, Any]:
    """The allowed custom rewards (exact paths) and module prefixes, as the web app sees them."""
    return {"allowed": [{"path": r.path, "name": r.name, "source": r.source}
                        for r in custom_rewards.registered()],
            "prefixes": custom_rewards.prefixes(),
            "how": f"register a function in the Python entry point group "
                   f"{custom_rewards.ENTRY_POINT_GROUP} or list it in {custom_rewards.ENV_VAR}"}


@router.get("")
def list_rewards() -> dict[str, Any]:
    """Every reward function with its parameters, and under ``custom`` what it may import."""
    return {"rewards": [_reward_json(r) for r in REWARDS.values()], "custom": custom_listing()}
