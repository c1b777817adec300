"""moto's S3 server (`python -m moto.server`, `moto[server]`) as the suite runs it: the same
server and arguments, without werkzeug's access-log line per request (written to a log file the
suite reads only when the server fails to start): werkzeug logs at INFO only where its logger has
no level, so WARNING is set.

Usage: python tests/s3_server.py -H 127.0.0.1 -p PORT
"""

from __future__ import annotations

import logging

from moto.server import main

if __name__ == "__main__":
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    main()
