"""A notebook whose cells are not in nbformat's shape is read as far as it goes, or refused with
a reason, never a 500 (issue 55): ``outputs`` an object instead of a list (nbformat's reader
raised AttributeError inside, re-raised as jsonschema's ValidationError), an output that is not
an object, ``data`` a list, ``text`` an object or a list of numbers, cells that are not
objects, a version 3 notebook with the same faults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.importers.test_readers import RUNS, write_notebook

STREAM = {"output_type": "stream", "name": "stdout", "text": "hello\n"}


def upload(client: TestClient, notebook: dict[str, Any]):  # type: ignore[no-untyped-def]
    return client.post("/api/imports",
                       files={"log": ("colab.ipynb", json.dumps(notebook).encode())})


def one_cell(outputs: object) -> dict[str, Any]:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "source": "x",
         "execution_count": 1, "outputs": outputs}]}


BAD_SHAPES = {
    "outputs an object": one_cell(STREAM),
    "outputs an object of junk": one_cell({"a": 1}),
    "outputs a string": one_cell("abc"),
    "outputs a number": one_cell(5),
    "an output that is a list": one_cell([[1]]),
    "data a list": one_cell([{"output_type": "execute_result", "execution_count": 1,
                              "metadata": {}, "data": ["x"]}]),
    "text an object": one_cell([{**STREAM, "text": {"a": 1}}]),
    "text a list of numbers": one_cell([{**STREAM, "text": [1, None]}]),
    "html an object": one_cell([{"output_type": "display_data", "metadata": {},
                                 "data": {"text/html": {"a": 1}}}]),
    "cells that are not objects": {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                   "cells": [5, "x"]},
    "v3 cells an object": {"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                           "worksheets": [{"cells": {"a": 1}}]},
    "v3 outputs an object": {"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                             "worksheets": [{"cells": [{"cell_type": "code", "input": "x",
                                                        "outputs": {"a": 1}}]}]},
}


@pytest.mark.one_backend
@pytest.mark.parametrize("name", list(BAD_SHAPES))
def test_a_notebook_in_the_wrong_shape_is_a_422_with_a_reason(client: TestClient,
                                                              name: str) -> None:
    reply = upload(client, BAD_SHAPES[name])
    assert reply.status_code == 422, (reply.status_code, reply.text[:300])
    assert "notebook" in reply.json()["detail"], reply.text
    assert client.get("/api/runs").json() == []


@pytest.mark.one_backend
@pytest.mark.parametrize("fault", ["outputs an object", "a junk cell beside it"])
def test_the_training_table_is_read_past_a_misshapen_cell(client: TestClient, tmp_path: Path,
                                                          fault: str) -> None:
    notebook = json.loads(write_notebook(tmp_path / "nb.ipynb", RUNS["healthy"]()).read_text())
    table_cell = notebook["cells"][1]
    if fault == "outputs an object":  # the table's output saved without its list
        table_cell["outputs"] = table_cell["outputs"][0]
    else:
        notebook["cells"][0]["outputs"] = {"a": [1, {"b": None}]}
        notebook["cells"].insert(0, "not a cell")
    reply = upload(client, notebook)
    assert reply.status_code == 201, (reply.status_code, reply.text[:300])
    [run] = reply.json()["runs"]
    spec = client.get(f"/api/runs/{run['id']}").json()["spec"]
    assert spec["source_format"] == "notebook (table)"
