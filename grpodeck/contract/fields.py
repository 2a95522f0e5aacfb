"""Field types for everything a request may carry: text that every database can store, capped.

Python strings may hold what no database accepts: a lone UTF-16 surrogate (``"\\ud800"``, which
JSON can spell and ``json.loads`` returns) cannot be encoded as UTF-8, and PostgreSQL refuses
NUL characters in text. Left to the database, either is a 500 after validation; these types
refuse them at validation (422 naming the field; pydantic itself refuses lone surrogates), or
clean them where the text is untrusted output that must not make a whole report batch fail
(model completions, a worker's error text).
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, StringConstraints


def storable(text: str) -> str:
    """Reject text a database cannot store: lone surrogates (not UTF-8) and NUL characters."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode (it holds a lone surrogate)") from None
    if "\x00" in text:
        raise ValueError("text must not contain NUL characters")
    return text


def cleaned(text: str) -> str:
    """Untrusted output (a model's completion): replace what cannot be stored, keep the rest."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def Text(max_length: int, min_length: int = 0) -> type[str]:  # a type factory, named like one
    """A storable string of at most ``max_length`` characters."""
    return Annotated[str, StringConstraints(min_length=min_length, max_length=max_length),  # type: ignore[return-value]
                     AfterValidator(storable)]


def Key(max_length: int) -> type[str]:  # a type factory, named like one
    """A metric name: ``Text``'s rules checked inside pydantic-core, not by a Python call per
    name (a 100k-step batch stream has 3M names: ``storable`` was a fifth of the report
    handler, issue 57). NUL is refused by the pattern; a lone surrogate by pydantic's JSON
    parser (the report API reads JSON), and by the readers' name cleaning
    (``app.metrics.names``) on every other path."""
    return Annotated[str, StringConstraints(max_length=max_length, pattern=r"^[^\x00]*$")]  # type: ignore[return-value]


def CleanText(max_length: int, keep_tail: bool = False) -> type[str]:
    """Untrusted text (model output, a worker's error) made storable and cut to ``max_length``
    characters (the last ones with ``keep_tail``: a traceback's end says what failed) rather
    than refused: a report must not be lost over its prose."""
    def clip(value: object) -> object:
        if not isinstance(value, str):
            return value
        text = cleaned(value)
        return text[-max_length:] if keep_tail else text[:max_length]

    return Annotated[str, BeforeValidator(clip)]  # type: ignore[return-value]


def _finite_or_none(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


# A number kept inside a JSON column: JSON (and PostgreSQL's json type) has no NaN or inf, so a
# non-finite value is stored as null ("no value"), like a reward function that abstained.
FiniteOrNull = Annotated[float | None, AfterValidator(_finite_or_none)]
