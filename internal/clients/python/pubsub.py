"""redis-py's PubSub against a server, as an application uses it: a
subscription to a channel and a pattern on the PubSub's own connection,
messages published from the client, get_message until they are in.
Usage: pubsub.py HOST PORT. Prints the PUBLISH counts and the messages as
JSON; exits non-zero when they do not arrive."""
import json
import sys
import time

import redis

host, port = sys.argv[1], int(sys.argv[2])
r = redis.Redis(host=host, port=port, socket_timeout=5)
p = r.pubsub()
p.subscribe("news")
p.psubscribe("news*")
got = []
deadline = time.time() + 5
while len(got) < 2 and time.time() < deadline:  # the two confirmations
    m = p.get_message(timeout=1)
    if m:
        got.append([m["type"], m["channel"].decode(), m["data"]])
counts = [r.publish("news", "n1"), r.publish("newsroom", "n2")]
while len(got) < 5 and time.time() < deadline:
    m = p.get_message(timeout=1)
    if m:
        got.append([m["type"], (m["pattern"] or b"").decode(), m["channel"].decode(), m["data"].decode()])
subs = r.pubsub_numsub("news")
p.close()
print(json.dumps({"counts": counts, "messages": got, "numsub": [[c.decode(), n] for c, n in subs]}))
sys.exit(0 if len(got) == 5 else 1)
