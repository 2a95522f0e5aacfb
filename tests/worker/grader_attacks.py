"""Test data: completions that try to score without solving, built for any coding problem.

Each attack replaces the names the tests might borrow from the completion instead of answering:
builtins (``abs`` returning 0, ``range`` returning nothing so every looped assert is skipped,
``tuple`` returning a constant), modules (a ``math`` whose ``fabs`` returns 0, also planted in
``sys.modules`` and on the real module), the helpers the problem's own setup defines (``poly``,
``encode_cyclic``), and the ``builtins`` module itself; and its entry point answers with
something that is no answer (0, the input unchanged, an object equal to everything whose
``__class__`` claims to be ``int``). A grader that lets the tests see any of these names scores
some problem 1.0 (issue 33 found 5 of HumanEval's 164); an honest one scores every attack 0.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

# What each shadowed builtin returns in the "shadows" attack: whatever makes a typical assert
# hold without the right answer.
BUILTIN_FORGERIES = {
    "abs": "0", "round": "0", "len": "0", "sum": "0", "max": "0", "min": "0", "int": "0",
    "float": "0", "tuple": "()", "list": "[]", "sorted": "[]", "set": "set()", "range": "[]",
    "enumerate": "[]", "zip": "[]", "map": "[]", "filter": "[]", "reversed": "[]",
    "isinstance": "True", "all": "True", "any": "True", "callable": "True", "bool": "True",
    "str": "''", "repr": "''", "print": "None", "type": "object",
}
# Patched on the ``builtins`` module too (the rest would break the completion's own process).
PATCHED_ON_BUILTINS = {"abs", "round", "sum", "sorted", "all", "any", "range", "max", "min"}
ALWAYS_SHADOWED = ("abs", "range", "tuple", "isinstance", "all", "any", "len", "round",
                   "sorted", "str", "sum")

PRELUDE = '''
import builtins as _b, sys as _sys
_real_isinstance, _real_str = isinstance, str

def _quiet(*a, **k):
    """A helper or module function that makes a check hold: 0 for numbers, the text back."""
    return a[0] if a and _real_isinstance(a[0], _real_str) else 0

class _Module:
    """A module whose every function is ``_quiet`` (``math.fabs(x)`` is 0)."""
    def __getattr__(self, name):
        return _quiet

class _Yes:
    """Equal to everything, true, empty, callable."""
    __hash__ = object.__hash__
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __lt__ = __le__ = __gt__ = __ge__ = __eq__
    def __bool__(self): return True
    def __len__(self): return 1
    def __iter__(self): return iter(())
    def __call__(self, *a, **k): return self
    def __getattr__(self, name): return self
    def __sub__(self, other): return 0
    __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __sub__
    def __abs__(self): return 0
    def __index__(self): return 0
    def __float__(self): return 0.0

class _Int(_Yes):
    """A yes-man that also claims to be an ``int`` (``isinstance(x, int)`` is True)."""
    @property
    def __class__(self): return int
'''


@dataclass(frozen=True)
class Problem:
    """One coding problem as the grader sees it, plus a known-good solution."""

    name: str
    setup: str
    tests: list[str]
    entry_point: str
    reference: str


def _names(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _modules(source: str) -> set[str]:
    """Modules the setup or tests import (and ``math``, which completions often import)."""
    tree = ast.parse(source)
    return {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
            if isinstance(n, ast.Import) for a in n.names} | {"math"}


def _helpers(setup: str, entry_point: str) -> set[str]:
    tree = ast.parse(setup) if setup.strip() else ast.Module(body=[], type_ignores=[])
    return {n.name for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name != entry_point}


def shadows(p: Problem) -> str:
    """Every builtin, module and setup helper the tests name, replaced by a forger."""
    used = _names(p.setup + "\n" + "\n".join(p.tests))
    lines = [PRELUDE]
    for mod in sorted(_modules(p.setup + "\n" + "\n".join(p.tests))):
        lines.append(f"{mod} = _Module()\n_sys.modules[{mod!r}] = {mod}")
    for name in sorted(_helpers(p.setup, p.entry_point)):
        lines.append(f"{name} = _quiet")
    builtin_names = (used & set(dir(builtins)) | set(ALWAYS_SHADOWED)) & set(BUILTIN_FORGERIES)
    for name in sorted(builtin_names):
        lines.append(f"{name} = lambda *a, **k: {BUILTIN_FORGERIES[name]}")
        if name in PATCHED_ON_BUILTINS:
            lines.append(f"_b.{name} = {name}")
    lines.append(f"def {p.entry_point}(*a, **k):\n    return _quiet(*a, **k)")
    return "\n".join(lines) + "\n"


def yes_men(p: Problem) -> str:
    """The same names bound to an object equal to everything; the answer is one too."""
    used = _names(p.setup + "\n" + "\n".join(p.tests))
    targets = ((used & set(dir(builtins))) | set(ALWAYS_SHADOWED)) - {"__name__"}
    targets |= _helpers(p.setup, p.entry_point) | _modules(p.setup + "\n" + "\n".join(p.tests))
    lines = [PRELUDE, "_yes = _Yes()"]
    for name in sorted(targets):
        lines.append(f"{name} = _yes")
    for name in sorted(_modules(p.setup + "\n" + "\n".join(p.tests))):
        lines.append(f"_sys.modules[{name!r}] = _yes")
    lines.append("_b.AssertionError = type('Never', (Exception,), {})")
    lines.append(f"def {p.entry_point}(*a, **k):\n    return _Int() if len(a) % 2 else _yes")
    return "\n".join(lines) + "\n"


ATTACKS = {"shadows": shadows, "yes_men": yes_men}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


EASY_REFERENCES = {
    "add": "return a + b", "is_even": "return n % 2 == 0", "square": "return x * x",
    "maximum": "return max(numbers)", "reverse_string": "return s[::-1]",
    "count_vowels": "return sum(c in 'aeiou' for c in s)", "subtract": "return a - b",
    "first_element": "return items[0]", "double": "return 2 * x",
    "sum_list": "return sum(numbers)", "is_positive": "return x > 0",
    "to_upper": "return s.upper()", "multiply": "return a * b", "length": "return len(items)",
    "minimum": "return min(numbers)", "absolute": "return abs(x)",
    "average": "return sum(numbers) / len(numbers)", "is_palindrome": "return s == s[::-1]",
    "last_element": "return items[-1]", "cube": "return x ** 3",
    "factorial": "return 1 if n == 0 else n * factorial(n - 1)",
    "count_words": "return len(s.split())", "celsius_to_fahrenheit": "return c * 9 / 5 + 32",
    "is_empty": "return len(items) == 0", "greet": "return 'Hello, ' + name + '!'",
    "fibonacci": "return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "remove_spaces": "return s.replace(' ', '')", "is_divisible": "return a % b == 0",
    "max_of_two": "return max(a, b)", "count_char": "return s.count(c)",
    "sort_list": "return sorted(numbers)", "even_numbers": "return [x for x in numbers if x % 2 == 0]",
    "capitalize_first": "return s[:1].upper() + s[1:]",
    "is_prime": "return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
    "unique": "return list(dict.fromkeys(items))", "string_length": "return len(s)",
    "power": "return base ** exp", "sum_digits": "return sum(int(d) for d in str(n))",
    "join_words": "return ' '.join(words)", "square_all": "return [x * x for x in numbers]",
}


def problems() -> list[Problem]:
    """Every ``builtin:humaneval`` and ``builtin:easy-python`` problem, as training grades it."""
    from worker.training.code_datasets import EASY_PROBLEMS, humaneval_problems, humaneval_rows
    found = []
    for p, row in zip(humaneval_problems(), humaneval_rows(), strict=True):
        found.append(Problem(p["task_id"], row["setup"], [row["tests"]], p["entry_point"],
                             p["prompt"] + p["canonical_solution"]))
    for signature, _, checks in EASY_PROBLEMS:
        name = signature.split("(")[0]
        found.append(Problem(f"easy-python/{name}", "", [f"assert {c}" for c in checks], name,
                             f"def {signature}:\n    {EASY_REFERENCES[name]}\n"))
    return found
