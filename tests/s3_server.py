"""moto's S3 server (`python -m moto.server`, `moto[server]`) as the suite runs it: the same
server and arguments, less two costs it paid on every request, which were about 40 % of its
samples in the fleet tests (tests/fleet/test_staged_merge.py, bench/RESULTS.md):

- its service lookup listed moto's package folder, a stat per moto module, to learn that
  "s3.amazonaws.com" names none of them (`moto.backends.list_of_moto_modules`, under the
  dispatcher's lock): the folder does not change while the server runs, so it is listed once;
- werkzeug's access-log line per request, written to a stderr the suite discards: werkzeug logs at
  INFO only where its logger has no level, so WARNING is set.

Usage: python tests/s3_server.py -H 127.0.0.1 -p PORT
"""

from __future__ import annotations

import logging

from moto import backends
from moto.server import main

MODULES = tuple(backends.list_of_moto_modules())


def listed_modules() -> tuple[str, ...]:
    return MODULES


if __name__ == "__main__":
    backends.list_of_moto_modules = listed_modules
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    main()
