"""The edge of every fleetscope command line: where errors become messages and exit codes.

In the core because both command lines share it: `fleetscope` (app.cli) and the GPU host's
`fleetscope-agent` (collector.cli), which may import nothing but the core.
"""

from __future__ import annotations

import argparse
import gc
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
    *,
    exit_process: bool = False,
) -> int:
    """Parse, load settings, call the handler; the one place errors become messages and codes.

    `fleetscope-agent` goes through here too, so both commands behave the same at the edge.
    `exit_process`: this call is the whole process (the console script, not a test calling
    `main([...])`), so a standalone command that succeeded may end it at once (`_exit_now`).
    """
    args = parser.parse_args(argv)
    # A command that reads no setting and logs nothing (a file tool: `fleetscope trace analyze`)
    # sets `standalone=fn(args)` instead of a handler: no settings, logging or demo hook, ~25 ms
    # of a run that is measured whole against HTA's (issue 19); it runs with the cyclic garbage
    # collector paused (`_run_standalone`), so it must be one short run, not a service.
    standalone: Callable[[argparse.Namespace], int] | None = getattr(args, "standalone", None)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None and standalone is None:
        parser.print_help()
        return 2
    try:
        if standalone is not None:
            return _run_standalone(standalone, args, exit_process)
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


def _run_standalone(
    standalone: Callable[[argparse.Namespace], int], args: argparse.Namespace, exit_process: bool
) -> int:
    """Run a standalone command with the cyclic garbage collector paused, and end the process
    when it succeeded and is the whole process (`_exit_now`).

    Such a command is one short run that imports its stack (numpy and the rest) and ends: in
    `fleetscope trace analyze` the collector ran ~60 times, ~10 ms of the command (issue 19),
    mostly walking the objects those imports build, to find ~600 objects of cyclic garbage, the
    same number on every trace (reference counting frees the analyses' own objects). The
    process ends with the collector still paused: resuming it first walks every object the run
    made (~8 ms). A caller that goes on (a test calling `main`) gets it back."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        code = standalone(args)
        if exit_process and code == 0:
            _exit_now()
        return code
    finally:
        if was_enabled:
            gc.enable()


def _exit_now() -> None:
    """End the process now, skipping the interpreter's teardown: for a standalone command (issue
    19: `fleetscope trace analyze` is timed whole against HTA, and finalising numpy and every
    module cost 10-17 ms of it). Everything a normal exit does that has an effect outside the
    process is done first: stdout and stderr flushed (a broken pipe raises here, inside `run`'s
    handler), the `atexit` callbacks run, stdout and stderr flushed again. A standalone command
    leaves no file of its own open and no thread running; should a thread still run, the
    normal exit (which joins it) is taken instead."""
    sys.stdout.flush()
    sys.stderr.flush()
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return
    import atexit

    atexit._run_exitfuncs()  # what they print is flushed next
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
