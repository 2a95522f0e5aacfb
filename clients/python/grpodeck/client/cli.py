"""``grpodeck-client``: the training node's command line (the server's ``grpodeck`` needs the
whole server installed). ``grpodeck-client import --url URL --api-key KEY PATH``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from grpodeck.client.upload import UploadError, upload_log


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpodeck-client",
                                     description="Talk to a GRPO Deck from a training node.")
    commands = parser.add_subparsers(dest="command", required=True)
    imp = commands.add_parser("import", help="upload a training log (file or run folder) as an "
                              "imported run")
    imp.add_argument("path", type=Path)
    imp.add_argument("--url", default=os.environ.get("GRPODECK_URL"),
                     help="the Deck's address (default: $GRPODECK_URL)")
    imp.add_argument("--api-key", default=os.environ.get("GRPODECK_API_KEY"),
                     help="an API key from the Deck's /account page (default: $GRPODECK_API_KEY)")
    imp.add_argument("--name", help="run name (default: the file or folder name)")
    imp.add_argument("--map", action="append", default=[], metavar="LOG_KEY=NAME",
                     help="read a log key as a known metric (e.g. Reward=reward); repeatable")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.url:
        print("error: --url (or GRPODECK_URL) is required", file=sys.stderr)
        return 2
    try:
        runs = upload_log(args.url, args.api_key, args.path, args.name, args.map)
    except (UploadError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for run in runs:
        print(f"imported run {run['id']} ({run['verdict']}): {run['url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
