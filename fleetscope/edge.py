"""The edge of every fleetscope command line: where errors become messages and exit codes.

In the core because both command lines share it: `fleetscope` (app.cli) and the GPU host's
`fleetscope-agent` (collector.cli), which may import nothing but the core.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fleetscope.errors import FleetscopeError

if TYPE_CHECKING:
    from fleetscope.settings import Settings

Handler = Callable[[argparse.Namespace, "Settings"], int]
# A command line's own step between loading the settings and the handler (app.cli: follow a
# running demo); a hook, because the core may import no app code.
Prepare = Callable[[argparse.Namespace, "Settings"], "Settings"]


def run(
    argv: Sequence[str] | None,
    parser: argparse.ArgumentParser,
    prepare: Prepare | None = None,
) -> int:
    """Parse, load settings, call the handler; the one place errors become messages and codes.

    `fleetscope-agent` goes through here too, so both commands behave the same at the edge.
    """
    args = parser.parse_args(argv)
    # A command that reads no setting and logs nothing (a file tool: `fleetscope trace analyze`)
    # sets `standalone=fn(args)` instead of a handler: it needs no settings, logging or demo hook.
    standalone: Callable[[argparse.Namespace], int] | None = getattr(args, "standalone", None)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None and standalone is None:
        parser.print_help()
        return 2
    try:
        if standalone is not None:
            return standalone(args)
        assert handler is not None
        # Loaded only once a command runs: `fleetscope --help` stays fast.
        import logging

        from fleetscope.settings import load_settings

        settings = load_settings(args.config)
        if prepare is not None:
            settings = prepare(args, settings)
        logging.basicConfig(
            level=settings.core.log_level.upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        return handler(args, settings)
    except FleetscopeError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `fleetscope ... | head`: the reader left, which is not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return 0
