"""Who calls the MLflow API: a Deck API key, sent as MLflow's client sends credentials.

``MLFLOW_TRACKING_TOKEN`` arrives as ``Authorization: Bearer <key>``;
``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD`` as Basic, where the password is the
key (the username is not checked: the key names its user). Only headers count, never the
session cookie, so a page in a browser cannot act here on a logged-in user's behalf.
Development mode (no accounts, loopback) is the app's own rule (``app.auth.middleware``).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import Depends, Request

from app.auth.identity import Identity
from app.auth.middleware import identify
from app.mlflow.errors import MlflowError


def header_key(authorization: str | None) -> str | None:
    """The API key in a Bearer or Basic ``Authorization`` header; None when there is none."""
    scheme, _, value = (authorization or "").partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return value or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


def mlflow_identity(request: Request) -> Identity:
    """A dependency: the caller, or MLflow's 401 saying what to send."""
    identity, why = identify(request.scope, header_key(request.headers.get("authorization")),
                             None)
    if identity is None:
        raise MlflowError(401, "UNAUTHENTICATED",
                          f"{why}: set MLFLOW_TRACKING_TOKEN to a GRPO Deck API key")
    return identity


Caller = Annotated[Identity, Depends(mlflow_identity)]
