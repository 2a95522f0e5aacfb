"""`grpodeck user ...`: accounts from the command line (the first admin is made here), and the
check that keeps ``grpodeck serve`` off the network until someone can log in."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from app.auth import service
from app.auth.local import is_loopback
from app.core.config import get_settings
from app.core.db import get_sessionmaker, migrate

PASSWORD_ENV = "GRPODECK_NEW_PASSWORD"

user_cli = typer.Typer(help="Dashboard accounts and their API keys.", no_args_is_help=True)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if PASSWORD_ENV in os.environ:
        return os.environ[PASSWORD_ENV]
    return typer.prompt("Password", hide_input=True, confirmation_prompt=True)


@user_cli.command("create")
def create(email: str,
           admin: Annotated[bool, typer.Option("--admin", help="may cancel anyone's runs")] = False,
           password_stdin: Annotated[bool, typer.Option(
               "--password-stdin", help=f"read the password from stdin (or set {PASSWORD_ENV})"
           )] = False) -> None:
    """Create an account; prompts for the password unless given on stdin or in the env."""
    migrate()
    with get_sessionmaker()() as db:
        try:
            user = service.create_user(db, email=email, password=_password(password_stdin),
                                       is_admin=admin)
        except service.AccountError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        db.commit()
        typer.echo(f"created {'admin ' if user.is_admin else ''}user {user.email}")


@user_cli.command("list")
def list_cmd() -> None:
    """List accounts."""
    with get_sessionmaker()() as db:
        for user in service.list_users(db):
            typer.echo(f"{user.id}\t{user.email}\t{'admin' if user.is_admin else 'user'}")


@user_cli.command("api-key")
def api_key(email: str, name: Annotated[str, typer.Option(help="what the key is for")] = "cli"
            ) -> None:
    """Create an API key for an account and print it (shown only once)."""
    from sqlalchemy import select

    from app.auth.models import User

    with get_sessionmaker()() as db:
        user = db.scalar(select(User).where(User.email == email.strip().lower()))
        if user is None:
            typer.echo(f"error: no user {email}", err=True)
            raise typer.Exit(2)
        _row, key = service.create_api_key(db, user, name=name)
        db.commit()
        typer.echo(key)


def refuse_unsafe_bind(host: str) -> None:
    """Serving beyond this machine needs accounts: otherwise anyone who reaches the port could
    launch runs on the GPUs. Exit with a message that says what to do."""
    if is_loopback(host):
        return
    if get_settings().auth == "off":
        problem = "GRPODECK_AUTH=off turns login off, which is only allowed on 127.0.0.1"
    else:
        with get_sessionmaker()() as db:
            if service.any_users(db):
                return
        problem = "no account exists, so anyone who can reach this port could launch runs"
    typer.echo(f"error: refusing to serve on {host}: {problem}.\n"
               "Create an admin first:  grpodeck user create --admin you@example.com\n"
               "(or serve on 127.0.0.1 for local development, where login is skipped)", err=True)
    raise typer.Exit(2)
