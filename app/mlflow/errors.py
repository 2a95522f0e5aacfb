"""MLflow's error answer, ``{"error_code": ..., "message": ...}``: its client reads the code
(``RESOURCE_DOES_NOT_EXIST`` makes ``get_experiment_by_name`` return None, any other raises
``MlflowException`` with the message), so every refusal on ``/mlflow`` takes this shape."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.core.errors import safe_text


class MlflowError(Exception):
    """A refusal in MLflow's terms: the HTTP status, MLflow's error code and the reason."""

    def __init__(self, status: int, error_code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def invalid(message: str) -> MlflowError:
    return MlflowError(400, "INVALID_PARAMETER_VALUE", message)


def missing(message: str) -> MlflowError:
    return MlflowError(404, "RESOURCE_DOES_NOT_EXIST", message)


def answer(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MlflowError)
    headers = {"WWW-Authenticate": 'Bearer, Basic realm="GRPO Deck"'} if exc.status == 401 else {}
    return JSONResponse({"error_code": exc.error_code, "message": safe_text(exc.message, 1_000)},
                        status_code=exc.status, headers=headers)


def install(app: FastAPI) -> None:
    app.add_exception_handler(MlflowError, answer)
