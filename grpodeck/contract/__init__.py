"""The one place web (``app``), worker (``worker``) and outside clients meet.

Nothing else crosses between ``app`` and ``worker`` (tests/test_contract.py walks their
imports). Only pydantic and the standard library may be imported here, so a training node can
use the contract without FastAPI, SQLAlchemy, Celery or the ML stack.
"""
