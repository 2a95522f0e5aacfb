"""``grpodeck-client``: the training node's command line (the server's ``grpodeck`` needs the
whole server installed). ``grpodeck-client import --url URL --api-key KEY PATH`` uploads a log;
``grpodeck-client sync DIR`` delivers runs spooled while the Deck was away
(``grpodeck.client.sync``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from grpodeck.client.sync import SyncError, spools_in, sync_run
from grpodeck.client.upload import UploadError, upload_log


def _deck_options(command: argparse.ArgumentParser, url_help: str, key_help: str) -> None:
    """The path and the Deck's address and key, as every command that talks to a Deck takes
    them."""
    command.add_argument("path", type=Path)
    command.add_argument("--url", default=os.environ.get("GRPODECK_URL"), help=url_help)
    command.add_argument("--api-key", default=os.environ.get("GRPODECK_API_KEY"), help=key_help)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpodeck-client",
                                     description="Talk to a GRPO Deck from a training node.")
    commands = parser.add_subparsers(dest="command", required=True)
    imp = commands.add_parser("import", help="upload a training log (file or run folder) as an "
                              "imported run")
    _deck_options(imp, "the Deck's address (default: $GRPODECK_URL)",
                  "an API key from the Deck's /account page (default: $GRPODECK_API_KEY)")
    imp.add_argument("--name", help="run name (default: the file or folder name)")
    imp.add_argument("--map", action="append", default=[], metavar="LOG_KEY=NAME",
                     help="read a log key as a known metric (e.g. Reward=reward); repeatable")
    imp.add_argument("--save-map", action="store_true",
                     help="the Deck remembers --map for your next log of this file or folder "
                          "name (read with it when sent without --map)")
    sync = commands.add_parser("sync", help="deliver runs spooled while the Deck was away "
                               "(a run folder, or the spool_dir holding them)")
    _deck_options(sync, "the Deck's address (default: $GRPODECK_URL, else the one at init)",
                  "an API key, to register a run the Deck never saw (default: $GRPODECK_API_KEY)")
    sync.add_argument("--deadline", type=float, default=600.0,
                      help="seconds to keep trying per run (default 600)")
    return parser


def _sync(args: argparse.Namespace) -> int:
    try:
        spools = spools_in(args.path)
    except SyncError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    code = 0
    for spool in spools:
        try:
            done = sync_run(spool, args.url, args.api_key, deadline=args.deadline)
        except (SyncError, OSError) as exc:  # one line per run folder, never a traceback
            print(f"error: {exc}", file=sys.stderr)
            code = 1
            continue
        print(done.line())
        code = code or int(bool(done.rows_left or done.steps_left or done.over))
    return code


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "sync":
        return _sync(args)
    if not args.url:
        print("error: --url (or GRPODECK_URL) is required", file=sys.stderr)
        return 2
    try:
        runs = upload_log(args.url, args.api_key, args.path, args.name, args.map,
                          save_map=args.save_map)
    except (UploadError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for run in runs:
        print(f"imported run {run['id']} ({run['verdict']}): {run['url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
