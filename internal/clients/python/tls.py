"""Connects to Sluice over TLS with redis-py (ssl=True), as an application
would, and makes one decision. Usage: python3 tls.py HOST PORT CA [CERT KEY]
Prints the decision as JSON; exits 1 on any error."""
import json
import sys

import redis

host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cert = sys.argv[4] if len(sys.argv) > 4 else None
key = sys.argv[5] if len(sys.argv) > 5 else None
try:
    r = redis.Redis(host=host, port=port, ssl=True, ssl_ca_certs=ca, ssl_certfile=cert, ssl_keyfile=key,
                    socket_timeout=10)
    print(json.dumps(r.execute_command("CL.THROTTLE", "redis-py:tls", "4", "1", "60")))
except Exception as e:  # noqa: BLE001 - any failure is the answer
    print(repr(e), file=sys.stderr)
    sys.exit(1)
