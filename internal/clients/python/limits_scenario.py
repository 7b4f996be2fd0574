"""Debian's python3-limits with its redis storage (redis-py), unmodified:
FixedWindowRateLimiter (an INCRBY-and-EXPIRE script) and
MovingWindowRateLimiter (an LPUSH/LTRIM list of timestamps in one script,
read by another), each through hit, test, get_window_stats and clear, and
the storage's reset (a script that runs KEYS and DEL).

Usage: python3 limits_scenario.py ADDR, ADDR a unix socket path (starting
with "/") or HOST:PORT. Prints a JSON transcript (a list of steps, each
{"step": name, ...outcomes}); a library's failure is an outcome ("err"),
not a crash. Fields ending in _s are times in seconds, relative to the
client's clock (the two servers are run seconds apart)."""
import json
import sys
import time

from limits import parse
from limits.storage import RedisStorage
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

if len(sys.argv) != 2:
    print(__doc__, file=sys.stderr)
    sys.exit(2)
addr = sys.argv[1]
uri = "redis+unix://" + addr if addr.startswith("/") else "redis://" + addr

steps = []


def add(step, **fields):
    steps.append({"step": step, **fields})


def attempt(step, fn, shape):
    try:
        add(step, **shape(fn()))
    except Exception as e:  # noqa: BLE001 - a library's failure is an outcome
        add(step, err="%s: %s" % (type(e).__name__, e))


def stats(v):
    reset, remaining = v
    return {"remaining": remaining, "reset_in_s": round(reset - time.time(), 1)}


def is17g(s):
    """Whether s is written as Redis writes a Lua number given to
    redis.call (C's %.17g)."""
    try:
        return "%.17g" % float(s) == s
    except ValueError:
        return False


def read_back(step, key, as_list=False):
    try:
        r = storage.storage
        typ = r.type(key).decode()
        out = {"type": typ, "ttl_s": r.ttl(key), "pttl_ms": r.pttl(key)}
        if as_list:
            items = [x.decode() for x in r.lrange(key, 0, -1)]
            now = time.time()
            out["len"] = len(items)
            out["all_17g"] = all(is17g(x) for x in items)
            out["ages_s"] = [round(now - float(x), 1) for x in items]
        else:
            v = r.get(key)
            out["value"] = None if v is None else v.decode()
        add(step, **out)
    except Exception as e:  # noqa: BLE001
        add(step, err="%s: %s" % (type(e).__name__, e))


try:
    storage = RedisStorage(uri, socket_timeout=10)
    add("check", ok=storage.check())

    # Fixed window: 3 a minute.
    fixed = FixedWindowRateLimiter(storage)
    per_min = parse("3/minute")
    for i in range(1, 5):
        attempt("fixed hit alice %d" % i, lambda: fixed.hit(per_min, "alice"), lambda v: {"allowed": v})
    attempt("fixed test alice", lambda: fixed.test(per_min, "alice"), lambda v: {"allowed": v})
    attempt("fixed stats alice", lambda: fixed.get_window_stats(per_min, "alice"), stats)
    read_back("stored fixed alice", per_min.key_for("alice"))
    attempt("fixed hit bob cost 2", lambda: fixed.hit(per_min, "bob", cost=2), lambda v: {"allowed": v})
    attempt("fixed hit bob cost 2 again", lambda: fixed.hit(per_min, "bob", cost=2), lambda v: {"allowed": v})
    attempt("fixed clear alice", lambda: fixed.clear(per_min, "alice"), lambda v: {"res": v})
    attempt("fixed test alice after clear", lambda: fixed.test(per_min, "alice"), lambda v: {"allowed": v})
    attempt("fixed stats nobody", lambda: fixed.get_window_stats(per_min, "nobody"), stats)

    # Moving window: 3 in 10 seconds.
    moving = MovingWindowRateLimiter(storage)
    per_10s = parse("3 per 10 seconds")
    attempt("moving stats carol before", lambda: moving.get_window_stats(per_10s, "carol"), stats)
    for i in range(1, 5):
        attempt("moving hit carol %d" % i, lambda: moving.hit(per_10s, "carol"), lambda v: {"allowed": v})
    attempt("moving test carol", lambda: moving.test(per_10s, "carol"), lambda v: {"allowed": v})
    attempt("moving stats carol", lambda: moving.get_window_stats(per_10s, "carol"), stats)
    read_back("stored moving carol", per_10s.key_for("carol"), as_list=True)
    attempt("moving hit dave cost 2", lambda: moving.hit(per_10s, "dave", cost=2), lambda v: {"allowed": v})
    attempt("moving hit dave cost 2 again", lambda: moving.hit(per_10s, "dave", cost=2), lambda v: {"allowed": v})
    attempt("moving hit dave cost 1", lambda: moving.hit(per_10s, "dave", cost=1), lambda v: {"allowed": v})
    attempt("moving stats dave", lambda: moving.get_window_stats(per_10s, "dave"), stats)
    read_back("stored moving dave", per_10s.key_for("dave"), as_list=True)
    attempt("moving clear carol", lambda: moving.clear(per_10s, "carol"), lambda v: {"res": v})
    attempt("moving test carol after clear", lambda: moving.test(per_10s, "carol"), lambda v: {"allowed": v})

    # The scripts flushed: redis-py's EVALSHA meets NOSCRIPT, loads the
    # script again and retries.
    attempt("script flush", storage.storage.script_flush, lambda v: {"res": v})
    attempt("fixed hit erin after script flush", lambda: fixed.hit(per_min, "erin"), lambda v: {"allowed": v})
    attempt("moving hit erin after script flush", lambda: moving.hit(per_10s, "erin"), lambda v: {"allowed": v})

    # reset: every LIMITER* key, by a script running KEYS and DEL.
    storage.storage.set("unrelated", "1")
    attempt("storage reset", storage.reset, lambda v: {"deleted": v})
    attempt("keys after reset", lambda: sorted(k.decode() for k in storage.storage.keys("*")), lambda v: {"keys": v})
except Exception as e:  # noqa: BLE001
    add("scenario", err="%s: %s" % (type(e).__name__, e))

print(json.dumps(steps))
