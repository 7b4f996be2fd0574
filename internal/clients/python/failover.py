"""Drives a Sluice cluster with redis-py's RedisCluster, unmodified, while
cmd/sluice-server/failover_clients_test.go kills the Raft leader, and
reports every operation.

Usage: python3 failover.py SETTING SEEDS WORKERS PREFIX
  SETTING  default (the library's defaults) or recreate (see SETTINGS)
  SEEDS    host:port,host:port,... every member, as users configure them
  WORKERS  threads sharing one RedisCluster, one operation in flight each
  PREFIX   key prefix; operation i increments PREFIX{fo}:i

The lines on stdout are the JSON objects failover.mjs prints (ready, ok,
err, done; times in wall-clock milliseconds). A line "stop" on stdin (or
its end) stops new operations; the driver waits up to 10 s for those in
flight, prints "done" and exits; it exits by itself after 120 s.
"""

import json
import os
import sys
import threading
import time

from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException

PACE_S = 0.005
SETTLE_S = 10.0
HARD_LIMIT_S = 120.0

# See docs/cluster.md, "What unmodified clients see on failover".
# "recreate" is not a setting but what an application does about redis-py
# 4.3's reinitialization bug (it deep-copies its connection arguments, which
# hold a lock, and raises "cannot pickle '_thread.lock' object" once a node
# has died; fixed upstream in 4.4): on a RedisClusterException it builds a
# new RedisCluster from the seeds, retrying every 100 ms while that fails.
SETTINGS = {
    "default": {},
    "recreate": {},
}

out_lock = threading.Lock()


def now():
    return time.time() * 1000.0


def emit(obj):
    line = json.dumps(obj)
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main():
    setting, seed_list, workers, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if setting not in SETTINGS:
        print(f"unknown setting {setting}", file=sys.stderr)
        sys.exit(2)
    seeds = []
    for s in seed_list.split(","):
        host, port = s.rsplit(":", 1)
        seeds.append(ClusterNode(host, int(port)))
    clients = [RedisCluster(startup_nodes=seeds, **SETTINGS[setting])]
    clients[0].incr(f"{prefix}{{fo}}:ready")
    replace_lock = threading.Lock()

    def replace(broken):
        """A new RedisCluster in place of broken, unless another worker
        already replaced it."""
        with replace_lock:
            if clients[0] is not broken:
                return
            while True:
                try:
                    clients[0] = RedisCluster(startup_nodes=seeds, **SETTINGS[setting])
                    return
                except Exception:
                    time.sleep(0.1)
    emit({"ev": "ready", "t": now()})

    stopping = threading.Event()
    counter_lock = threading.Lock()
    state = {"next": 0, "pending": 0}

    def worker(w):
        while not stopping.is_set():
            with counter_lock:
                op = state["next"]
                state["next"] += 1
                state["pending"] += 1
            t0 = now()
            rc = clients[0]
            try:
                v = rc.incr(f"{prefix}{{fo}}:{op}")
                emit({"ev": "ok", "op": op, "w": w, "t0": t0, "t1": now(), "v": int(v)})
            except BaseException as e:  # every failure is a finding
                msg = f"{type(e).__name__}: {e}"[:300]
                emit({"ev": "err", "op": op, "w": w, "t0": t0, "t1": now(), "msg": msg})
                if setting == "recreate" and isinstance(e, RedisClusterException):
                    replace(rc)
            finally:
                with counter_lock:
                    state["pending"] -= 1
            left = PACE_S - (now() - t0) / 1000.0
            if left > 0:
                time.sleep(left)

    for w in range(workers):
        threading.Thread(target=worker, args=(w,), daemon=True).start()

    def stop():
        stopping.set()
        deadline = time.monotonic() + SETTLE_S
        while state["pending"] > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        emit({"ev": "done", "t": now(), "pending": state["pending"]})
        sys.stdout.flush()
        os._exit(0)

    threading.Timer(HARD_LIMIT_S, stop).start()
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop()


if __name__ == "__main__":
    main()
