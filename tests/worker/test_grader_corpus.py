"""No coding problem can be scored by redefining what its tests read (issue 33, grader).

Every ``builtin:humaneval`` and ``builtin:easy-python`` problem meets every attack of
``grader_attacks`` (shadowed builtins and modules, redefined setup helpers, a patched ``builtins``
module and ``sys.modules``, answers equal to everything or claiming to be ``int``), in the real
sandbox. The "shadows" attack goes through the training path (the row's ``entry_point``), the
"yes_men" one through the path for rows without one (the names the tests use that nothing else
defines). Before the fix the judge handed the tests every name the completion bound: "shadows"
scored 1.0 on HumanEval/4, 32, 33, 37, 38 and 50. Reference solutions are checked by
``test_code_datasets`` through the same two paths.
"""

from __future__ import annotations

import time

from tests.worker.grader_attacks import ATTACKS, fenced, problems
from worker import sandbox
from worker.rewards.code import borrowed_names, run_unit_tests

LIMITS = sandbox.Limits(wall_seconds=10, cpu_seconds=10)


def test_no_attack_scores_on_any_problem() -> None:
    cases = [(p, attack) for p in problems() for attack in sorted(ATTACKS)]
    started = time.monotonic()
    outcomes, _ = run_unit_tests(
        [fenced(ATTACKS[attack](p)) for p, attack in cases], [p.tests for p, _ in cases],
        [p.setup for p, _ in cases], limits=LIMITS,
        entry_points=[p.entry_point if attack == "shadows" else None for p, attack in cases])
    forged = [(p.name, attack, o.score) for (p, attack), o in zip(cases, outcomes, strict=True)
              if o.score != 0.0]
    print(f"{len(cases)} attacks in {time.monotonic() - started:.1f} s")
    assert len(cases) == 2 * (164 + 40)
    assert forged == []


def test_the_tests_borrow_only_the_entry_point_or_the_names_nothing_else_defines() -> None:
    setup = "import math\n\ndef poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    \"\"\"doc\"\"\"\n"
    tests = ["assert math.fabs(poly([1], find_zero([1]))) < abs(-1) and random.random() < 1"]
    assert borrowed_names(tests, setup, "find_zero") == (["find_zero"], ["random"])
    assert borrowed_names(tests, setup) == (["find_zero"], ["random"])
    assert borrowed_names(["assert helper(f(1)) == 2"], "") == (["f", "helper"], [])
    assert borrowed_names(["assert select([1]) == 1"], "") == (["select"], [])  # not the module
