"""Fuzzing the HTML forms (hypothesis): the launch form and the log import form answer 4xx or
a redirect for any field values and any uploaded bytes, never a 5xx."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.launch.form import NUMBER_FIELDS, REWARD_ROWS, TEXT_FIELDS

FUZZ = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

# Form values are text; these are the ones that used to reach a database or a float() badly.
TRICKY = ["NaN", "nan", "inf", "-Infinity", "1e400", "1e30", str(2**70), "-0", "0x10", "1_000",
          "\x00", "a\x00b", "../../etc/passwd", "builtin:tiny-random", "Qwen/Qwen2.5-0.5B",
          "x" * 300, "m" * 5_000, "target=1e400", "value=nan", "tag=" + "t" * 500, "=", ",,"]
# Any text a browser can send (UTF-8: no lone surrogates), plus the tricky values.
VALUE = st.one_of(st.sampled_from(TRICKY),
                  st.text(st.characters(exclude_categories=["Cs"]), max_size=60))
FIELDS = (list(TEXT_FIELDS) + list(NUMBER_FIELDS) + ["max_prompt_length", "stop_on_critical"]
          + [f"reward_{i}_{part}" for i in range(REWARD_ROWS) for part in ("name", "weight",
                                                                            "params")])


pytestmark = pytest.mark.postgres_only  # it refuses more (NUL, integer ranges, NaN in json)


@pytest.fixture
def client(app_db: str) -> TestClient:
    from app.main import create_app

    return TestClient(create_app(), base_url="http://127.0.0.1")


def no_5xx(response: Any, what: Any) -> None:
    assert response.status_code < 500, f"{what!r:.500} -> {response.status_code}"


def test_launch_form_never_answers_5xx(client: TestClient) -> None:
    @FUZZ
    @given(form=st.dictionaries(st.sampled_from(FIELDS), VALUE))
    def fuzz(form: dict[str, str]) -> None:
        response = client.post("/runs/new", data=form, follow_redirects=False)
        no_5xx(response, form)
        assert response.status_code in (303, 413, 422)

    fuzz()


FILE_NAME = st.one_of(st.sampled_from(["trainer_state.json", "log.jsonl", "..", ".", "a/../b",
                                       "completions_3.parquet", "x" * 400, "nul\x00.json",
                                       "no-suffix", "weird.\u00e9\u00e9"]),
                      st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40))
LOG_BYTES = st.one_of(
    st.binary(max_size=2_000),
    st.sampled_from([b'{"log_history": [{"step": 1e400, "loss": 1}]}',
                     b'{"log_history": [{"step": 9223372036854775808, "loss": 1}]}',
                     b'{"log_history": [{"step": 1, "loss": NaN}], "max_steps": NaN}',
                     b'[{"step": 1, "reward": 1e400}, {"step": -5, "reward": 1}]',
                     b'{"step": 1, "reward": "\\ud800"}\n{"step": 2, "\\u0000": 1}',
                     (b"{'loss': 1.0, 'epoch': inf}\n{'train_runtime': 1e308, "
                      b"'train_steps_per_second': 1e308}"),
                     (b"{'loss': 1.0, 'epoch': 1}\n{'loss': 2.0, 'epoch': nan}\n"
                      b"{'train_runtime': 10, 'train_steps_per_second': 0.4, 'epoch': 'x'}")]),
)


def test_import_form_never_answers_5xx(client: TestClient) -> None:
    @FUZZ
    @given(name=VALUE, log_name=FILE_NAME, log=LOG_BYTES,
           completions=st.lists(st.tuples(FILE_NAME, st.binary(max_size=300)), max_size=2))
    def fuzz(name: str, log_name: str, log: bytes, completions: list[tuple[str, bytes]]) -> None:
        files = [("log", (log_name, log))] + [("completions", c) for c in completions]
        response = client.post("/runs/import", data={"name": name}, files=files,
                               follow_redirects=False)
        no_5xx(response, (name, log_name, log[:200], completions))
        assert response.status_code in (303, 413, 422)

    fuzz()


PAGES = ["/runs/{id}", "/runs/{id}/_charts", "/runs/{id}/_findings", "/runs/{id}/_status",
         "/runs/{id}/rollouts", "/runs/{id}/rollouts/_groups", "/runs/{id}/rollouts/prompt/{key}"]
QUERY_KEYS = ["v", "m", "step", "outcome", "truncated", "component", "min_value", "max_value", "q",
              "sort"]


def test_pages_with_any_query_never_answer_5xx(client: TestClient) -> None:
    """The run pages (not in the OpenAPI schema) with any query, for a run whose metrics and
    rollouts hold NaN and inf."""
    from tests.app.conftest import running_run

    run_id, headers = running_run(client)
    rows = [{"step": s, "metrics": {"reward": v, "kl": 0.1}}
            for s, v in ((1, 0.5), (2, "nan"), (3, "inf"), (4, "-inf"))]
    groups = [{"index": 0, "prompt": "p", "completions": [
        {"text": "a", "rewards": {"r": 1.0}, "total": 1.0, "advantage": 0.5},
        {"text": "b", "rewards": {"r": None}, "total": None, "advantage": -0.5}]}]
    reply = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                        json={"rows": rows, "rollouts": [{"step": 2, "groups": groups}]})
    assert reply.status_code == 200

    @FUZZ
    @given(page=st.sampled_from(PAGES),
           run=st.one_of(st.just(str(run_id)), st.sampled_from(["0", "-1", str(2**70), "x"])),
           key=st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=70),
           query=st.dictionaries(st.sampled_from(QUERY_KEYS), VALUE, max_size=4))
    def fuzz(page: str, run: str, key: str, query: dict[str, str]) -> None:
        url = page.format(id=run, key=quote(key, safe=""))
        response = client.get(url, params=query)
        no_5xx(response, (url, query))

    fuzz()
