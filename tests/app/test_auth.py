"""Accounts in-process, on real SQLite and PostgreSQL: development mode, login, sessions, API
keys, run ownership, and the endpoints that stay public (the worker's per-run tokens)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select

from app.auth import service
from app.auth.models import ApiKey, UserSession
from app.core import config as config_module
from app.core.db import get_sessionmaker
from app.runs.models import Run
from tests.app.conftest import SPEC, running_run

PASSWORD = "correct horse battery"


def make_user(email: str, *, admin: bool = False) -> int:
    with get_sessionmaker()() as db:
        user = service.create_user(db, email=email, password=PASSWORD, is_admin=admin)
        db.commit()
        return user.id


def api_key(email: str) -> dict[str, str]:
    with get_sessionmaker()() as db:
        from app.auth.models import User

        user = db.scalar(select(User).where(User.email == email))
        assert user is not None
        _row, key = service.create_api_key(db, user, name="test")
        db.commit()
    return {"Authorization": f"Bearer {key}"}


def login(client: TestClient, email: str, password: str = PASSWORD, next_url: str = "/runs"):  # type: ignore[no-untyped-def]
    return client.post("/login", data={"email": email, "password": password, "next": next_url},
                       follow_redirects=False)


def test_development_mode_skips_login_and_every_page_says_so(client: TestClient) -> None:
    run_id = client.post("/api/runs", json=SPEC).json()["id"]
    for path in ("/runs", "/runs/new", "/runs/import", f"/runs/{run_id}",
                 f"/runs/{run_id}/rollouts", "/account"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert 'id="dev-mode"' in page.text and "Development mode" in page.text, path
    assert client.get("/docs").status_code == 200
    # the dev user may cancel (there is no one else)
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 200


def test_a_request_that_is_not_to_a_loopback_address_must_log_in(app_db: str) -> None:
    from app.main import create_app

    app = create_app()
    remote = TestClient(app, base_url="http://dashboard.example.com")
    page = remote.get("/runs", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/login")
    assert remote.get("/api/runs").status_code == 401
    assert remote.post("/api/runs", json=SPEC).status_code == 401
    # DNS rebinding: a loopback socket, but the browser names another host
    rebound = TestClient(app, base_url="http://127.0.0.1", headers={"Host": "attacker.example"})
    assert rebound.get("/api/runs").status_code == 401
    login_page = remote.get("/login")
    assert "grpodeck user create --admin" in login_page.text  # no account yet: how to make one


def test_the_first_account_ends_development_mode(client: TestClient) -> None:
    make_user("admin@example.com", admin=True)
    page = client.get("/runs", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=%2Fruns"
    assert client.get("/api/runs").status_code == 401
    assert client.get("/openapi.json").status_code == 401
    assert client.get("/docs", follow_redirects=False).status_code == 303
    htmx = client.get("/runs/_table", headers={"HX-Request": "true"})
    assert htmx.status_code == 401 and htmx.headers["HX-Redirect"] == "/login"
    assert client.get("/healthz").status_code == 200
    assert client.get("/static/app/app.css").status_code == 200
    assert 'id="dev-mode"' not in client.get("/login").text


def test_the_first_account_is_enforced_at_once_after_development_mode(
        client: TestClient) -> None:
    """Only "there are accounts" is remembered (``service.any_users``), never "there are none"."""
    assert client.get("/runs", follow_redirects=False).status_code == 200  # development mode
    make_user("admin@example.com", admin=True)
    assert client.get("/runs", follow_redirects=False).status_code == 303


def test_requests_with_accounts_do_not_ask_the_database_for_them_each_time(
        client: TestClient) -> None:
    make_user("admin@example.com", admin=True)
    asked: list[str] = []

    def count(conn, cursor, statement: str, *args: object) -> None:  # type: ignore[no-untyped-def]
        if "FROM users" in statement and "users.email" not in statement:
            asked.append(statement)

    engine = get_sessionmaker().kw["bind"]
    event.listen(engine, "before_cursor_execute", count)
    try:
        for _ in range(5):
            assert client.get("/runs/_table", headers={"HX-Request": "true"}).status_code == 401
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(asked) <= 1


def test_auth_off_skips_login_on_loopback_even_with_accounts(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    make_user("admin@example.com", admin=True)
    monkeypatch.setenv("GRPODECK_AUTH", "off")
    config_module.get_settings.cache_clear()
    assert 'id="dev-mode"' in client.get("/runs").text
    remote = TestClient(client.app, base_url="http://dashboard.example.com")
    assert remote.get("/api/runs").status_code == 401


def test_login_sets_a_safe_session_cookie_and_logout_ends_the_session(client: TestClient) -> None:
    make_user("ada@example.com")
    assert login(client, "ada@example.com", "wrong password").status_code == 401
    assert login(client, "nobody@example.com").status_code == 401
    response = login(client, "ada@example.com", next_url="/runs/new")
    assert response.status_code == 303 and response.headers["location"] == "/runs/new"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain-http public URL
    session_id = re.search(r"grpodeck_session=([^;]+)", cookie).group(1)  # type: ignore[union-attr]
    with get_sessionmaker()() as db:  # only a hash is stored
        assert db.scalar(select(UserSession.id_hash)) != session_id
    page = client.get("/runs")
    assert page.status_code == 200 and "ada@example.com" in page.text
    assert 'id="dev-mode"' not in page.text
    assert client.post("/logout", follow_redirects=False).status_code == 303
    stolen = TestClient(client.app, base_url="http://127.0.0.1",
                        cookies={"grpodeck_session": session_id})
    assert stolen.get("/api/runs").status_code == 401  # the session is gone on the server


def test_login_redirects_only_within_the_site(client: TestClient) -> None:
    make_user("ada@example.com")
    for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
        assert login(client, "ada@example.com", next_url=target).headers["location"] == "/runs"


def test_cookie_is_secure_when_the_public_url_is_https(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    make_user("ada@example.com")
    monkeypatch.setenv("GRPODECK_PUBLIC_URL", "https://deck.example.com")
    config_module.get_settings.cache_clear()
    assert "Secure" in login(client, "ada@example.com").headers["set-cookie"]


def test_api_keys_are_made_on_the_account_page_stored_hashed_and_revocable(
        client: TestClient) -> None:
    make_user("ada@example.com")
    login(client, "ada@example.com")
    created = client.post("/account/keys", data={"name": "laptop"})
    assert created.status_code == 201
    key = re.search(r'id="new-key-value">(gd_[\w-]+)<', created.text).group(1)  # type: ignore[union-attr]
    with get_sessionmaker()() as db:
        row = db.scalar(select(ApiKey))
        assert row is not None and row.key_hash != key and key not in row.key_hash
    script = TestClient(client.app, base_url="http://127.0.0.1")
    assert script.get("/api/runs", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert script.get("/api/runs", headers={"X-API-Key": key}).status_code == 200
    launched = script.post("/api/runs", json=SPEC, headers={"X-API-Key": key})
    assert launched.status_code == 201
    with get_sessionmaker()() as db:
        run = db.get(Run, launched.json()["id"])
        assert run is not None and run.created_by_id == row.user_id
    assert "laptop" in client.get("/account").text and key not in client.get("/account").text
    assert client.post(f"/account/keys/{row.id}/revoke", follow_redirects=False).status_code == 303
    assert script.get("/api/runs", headers={"X-API-Key": key}).status_code == 401
    assert script.get("/api/runs", headers={"X-API-Key": "gd_made_up"}).status_code == 401


def test_others_see_a_run_but_only_its_owner_or_an_admin_cancels_it(client: TestClient) -> None:
    make_user("owner@example.com")
    make_user("other@example.com")
    make_user("admin@example.com", admin=True)
    owner, other, admin = (api_key(f"{n}@example.com") for n in ("owner", "other", "admin"))
    first = client.post("/api/runs", json=SPEC, headers=owner).json()["id"]
    second = client.post("/api/runs", json=SPEC, headers=owner).json()["id"]
    assert client.get(f"/api/runs/{first}", headers=other).status_code == 200
    refused = client.post(f"/api/runs/{first}/cancel", headers=other)
    assert refused.status_code == 403 and "belongs to another user" in refused.json()["detail"]
    assert client.get(f"/api/runs/{first}", headers=other).json()["cancel_requested"] is False
    # the page form too, and the page does not offer the button
    login(client, "other@example.com")
    assert "Cancel run" not in client.get(f"/runs/{first}").text
    form = client.post(f"/runs/{first}/cancel")
    assert form.status_code == 403 and "belongs to another user" in form.text
    assert client.get(f"/api/runs/{first}").json()["status"] == "queued"
    login(client, "owner@example.com")
    assert "Cancel run" in client.get(f"/runs/{first}").text
    assert client.post(f"/api/runs/{first}/cancel", headers=owner).status_code == 200
    assert client.post(f"/api/runs/{second}/cancel", headers=admin).status_code == 200


def test_a_run_without_an_owner_is_the_admins(client: TestClient) -> None:
    run_id = client.post("/api/runs", json=SPEC).json()["id"]  # dev mode: no owner
    make_user("ada@example.com")
    make_user("admin@example.com", admin=True)
    refused = client.post(f"/api/runs/{run_id}/cancel", headers=api_key("ada@example.com"))
    assert refused.status_code == 403 and "no owner" in refused.json()["detail"]
    assert client.post(f"/api/runs/{run_id}/cancel",
                       headers=api_key("admin@example.com")).status_code == 200


def test_workers_report_with_their_run_token_when_accounts_exist(client: TestClient) -> None:
    make_user("ada@example.com")
    run_id, headers = running_run(client)
    body = {"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}
    assert client.post(f"/api/runs/{run_id}/metrics", json=body, headers=headers).status_code == 200
    assert client.get(f"/api/runs/{run_id}/control", headers=headers).status_code == 200
    assert client.post(f"/api/runs/{run_id}/metrics", json=body).status_code == 401
    # reading the series is a user's business, not the worker's
    assert client.get(f"/api/runs/{run_id}/metrics", headers=headers).status_code == 401
    done = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert done.status_code == 200 and done.json()["status"] == "succeeded"


def test_only_the_owner_or_an_admin_deletes_a_finished_run_and_its_data(client: TestClient) -> None:
    owner_id = make_user("owner@example.com")
    make_user("other@example.com")
    make_user("admin@example.com", admin=True)
    owner, other = api_key("owner@example.com"), api_key("other@example.com")
    admin = api_key("admin@example.com")
    run_id, token = running_run(client)
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None
        run.created_by_id = owner_id
        db.commit()
    body = {"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}
    assert client.post(f"/api/runs/{run_id}/metrics", json=body, headers=token).status_code == 200
    live = client.delete(f"/api/runs/{run_id}", headers=owner)
    assert live.status_code == 409 and "cancel it before" in live.json()["detail"]
    client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=token)
    refused = client.delete(f"/api/runs/{run_id}", headers=other)
    assert refused.status_code == 403 and "belongs to another user" in refused.json()["detail"]
    login(client, "other@example.com")
    assert 'id="delete-run"' not in client.get(f"/runs/{run_id}").text
    assert client.post(f"/runs/{run_id}/delete").status_code == 403
    assert client.get(f"/api/runs/{run_id}/metrics", headers=other).json()["reward"]["steps"] == [1]
    login(client, "owner@example.com")
    assert 'id="delete-run"' in client.get(f"/runs/{run_id}").text
    gone = client.post(f"/runs/{run_id}/delete", headers={"HX-Request": "true"})
    assert gone.status_code == 200 and gone.headers["HX-Redirect"] == "/runs"
    assert client.get(f"/api/runs/{run_id}", headers=admin).status_code == 404
    with get_sessionmaker()() as db:
        from tests.settled import point_count

        assert point_count(db, run_id) == 0
    second = client.post("/api/runs", json=SPEC, headers=owner).json()["id"]
    client.post(f"/api/runs/{second}/cancel", headers=owner)  # queued: cancelled at once
    assert client.delete(f"/api/runs/{second}", headers=admin).status_code == 204


@pytest.mark.parametrize(("host", "local"), [
    ("127.0.0.1", True), ("127.0.0.1:8000", True), ("localhost:8000", True), ("[::1]:8000", True),
    ("::1", True), ("0.0.0.0", False), ("0.0.0.0:8000", False), ("10.0.0.5:8000", False),
    ("deck.example.com", False), ("localhost.evil.example", False), ("", False)])
def test_which_hosts_count_as_this_machine(host: str, local: bool) -> None:
    from app.auth.local import host_of, is_loopback

    assert is_loopback(host_of(host)) is local


@pytest.mark.one_backend
def test_password_guessing_is_refused_after_three_failures_even_with_the_right_password(
        client: TestClient) -> None:
    make_user("ada@example.com")
    make_user("bob@example.com")
    for _ in range(3):  # the first rung of the ladder: 3 a minute
        assert login(client, "ada@example.com", "guess").status_code == 401
    refused = login(client, "ADA@example.com ")  # the right password, the same account
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert "too many failed sign-ins; try again in 1 min" in refused.text
    assert "grpodeck_session" not in refused.headers.get("set-cookie", "")
    assert login(client, "bob@example.com").status_code == 303  # other accounts are untouched


@pytest.mark.one_backend
def test_one_address_trying_many_accounts_is_refused_too(client: TestClient) -> None:
    make_user("ada@example.com")
    for i in range(12):  # 4 accounts' worth of failures, spread so no account reaches its own
        assert login(client, f"user{i}@example.com", "guess").status_code == 401
    assert login(client, "ada@example.com").status_code == 429


@pytest.mark.one_backend
def test_right_passwords_never_count_against_anyone(client: TestClient) -> None:
    make_user("ada@example.com")
    for _ in range(12):
        assert login(client, "ada@example.com").status_code == 303


@pytest.mark.one_backend
def test_failed_sign_ins_are_shared_through_redis_between_processes(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a Redis storage the count lives in Redis, not in this process: a limiter built
    afresh (another web process) still refuses."""
    import redis

    from app.auth import throttle

    monkeypatch.setenv("GRPODECK_LOGIN_LIMIT_STORAGE", "redis://127.0.0.1:6379/3")
    config_module.get_settings.cache_clear()
    redis.Redis.from_url("redis://127.0.0.1:6379/3").flushdb()
    make_user("ada@example.com")
    for _ in range(3):
        assert login(client, "ada@example.com", "guess").status_code == 401
    throttle._limits.cache_clear()  # what a second process starts with: no memory of its own
    assert login(client, "ada@example.com").status_code == 429
    throttle.reset()
    assert login(client, "ada@example.com").status_code == 303
