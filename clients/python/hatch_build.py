"""Put the repository's ``grpodeck/contract`` into the client's wheel and sdist.

The contract lives once, at the repository root, where the web app and the worker import it in
a checkout. A built client (wheel, or an sdist unpacked elsewhere) carries a copy under
``grpodeck/contract``. An editable install adds nothing: the checkout's root is on the path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class ContractHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        contract = Path(self.root).resolve().parents[1] / "grpodeck" / "contract"
        if (contract / "wire.py").is_file():
            for source in sorted(contract.glob("*.py")):  # no __pycache__
                build_data["force_include"][str(source)] = f"grpodeck/contract/{source.name}"
        elif not (Path(self.root) / "grpodeck" / "contract" / "wire.py").is_file():
            raise RuntimeError(f"grpodeck/contract not found at {contract}: build the client "
                               "from a GRPO Deck checkout (clients/python)")
