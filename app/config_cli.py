"""`fleetscope config show`: the effective settings and where each value came from."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetscope.settings import Settings


def register(subparsers: Any) -> None:
    config = subparsers.add_parser("config", help="Inspect settings.")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print every effective setting and its source")
    show.add_argument("--format", choices=["table", "json"], default="table")
    show.set_defaults(handler=show_settings)


def show_settings(args: argparse.Namespace, settings: Settings) -> int:
    rows = settings.rows()
    if args.format == "json":
        print(
            json.dumps(
                {
                    key: {"value": value, "source": source, "env": env}
                    for key, value, source, env in rows
                },
                indent=2,
            )
        )
        return 0
    width = max(len(key) for key, *_ in rows)
    for key, value, source, _env in rows:
        print(f"{key:<{width}}  {value!s:<40}  {source}")
    return 0
