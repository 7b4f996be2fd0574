// Drives a Sluice cluster with an unmodified Node.js cluster client while
// cmd/sluice-server/failover_clients_test.go kills the Raft leader, and
// reports every operation, so that the test can tell when the client
// recovered and what it lost or doubled.
//
// Usage: node failover.mjs CLIENT SETTING SEEDS WORKERS PREFIX
//   CLIENT   ioredis (Redis.Cluster) or node-redis (createCluster)
//   SETTING  default (the library's defaults), or fast (ioredis) or
//            refresh-MS (node-redis): see SETTINGS below
//   SEEDS    host:port,host:port,... every member, as users configure them
//   WORKERS  concurrent loops, each with one operation in flight
//   PREFIX   key prefix; operation i increments PREFIX{fo}:i
//
// Each worker INCRs a key of its own per operation (one INCR per key), so
// the final value of a key says how many times that operation was applied
// (ioredis reqid: makes a decision on it, see SETTINGS).
// Every line on stdout is one JSON object:
//   {"ev":"ready","t":T}                     connected, first INCR answered
//   {"ev":"ok","op":I,"w":W,"t0":T,"t1":T,"v":N}  INCR answered N
//   {"ev":"err","op":I,"w":W,"t0":T,"t1":T,"msg":"..."}  INCR rejected
//   {"ev":"done","t":T,"pending":N}          stopped; N operations unsettled
// T is wall-clock milliseconds since the epoch, fractional. A line "stop"
// on stdin (or its end) stops new operations; the driver waits up to 10 s
// for those in flight, prints "done" and exits. It exits by itself after
// 120 s in any case.
import readline from "node:readline";
import { performance } from "node:perf_hooks";
import Redis from "ioredis";
import { createCluster } from "redis";

const [client, setting, seedList, workersArg, prefix] = process.argv.slice(2);
const seeds = seedList.split(",").map((s) => {
  const i = s.lastIndexOf(":");
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
});
const workers = Number(workersArg);
const PACE_MS = 5; // at most one operation per worker per 5 ms
const SETTLE_MS = 10_000;
const HARD_LIMIT_MS = 120_000;

const now = () => performance.timeOrigin + performance.now();
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const describe = (err) => {
  if (!(err instanceof Error)) return String(err).slice(0, 300);
  const name = err.constructor && err.constructor.name !== "Error" ? err.constructor.name : err.name;
  return `${name}: ${err.message}`.slice(0, 300);
};

// The settings that shorten the outage, from each library's source (see
// docs/cluster.md, "What unmodified clients see on failover").
const SETTINGS = {
  ioredis: {
    default: {},
    // Defaults, but each operation is a decision with an id of its own,
    // CL.THROTTLE key 10 10 3600 1 REQID id: a command ioredis sends again
    // is answered from the first one's receipt, not charged twice
    // (docs/commands.md, REQID). "v" is then the remaining count.
    reqid: {},
    fast: {
      // Retry a command whose connection closed after 50 ms rather than
      // 100, and the same after TRYAGAIN and CLUSTERDOWN...
      retryDelayOnFailover: 50,
      retryDelayOnTryAgain: 50,
      retryDelayOnClusterDown: 50,
      // ...with enough redirections for an election of a few seconds: each
      // retry costs one of them (the default, 16, is 1.6 s at 100 ms).
      maxRedirections: 100,
      // Reconnect to the seeds quickly when every node was dropped.
      clusterRetryStrategy: () => 50,
    },
  },
  "node-redis": {
    default: {},
  },
};
// node-redis refresh-MS: look for a new topology once a node has failed to
// reconnect for MS ms (default 5000), retrying the connection every 50 ms.
const refresh = /^refresh-(\d+)$/.exec(setting);
if (client === "node-redis" && refresh) {
  SETTINGS["node-redis"][setting] = {
    topologyRefreshOnReconnectionAttemptStrategy: Number(refresh[1]),
    defaults: { socket: { reconnectStrategy: () => 50 } },
  };
}

if (!SETTINGS[client] || !SETTINGS[client][setting]) {
  console.error(`unknown client or setting: ${client} ${setting}`);
  process.exit(2);
}

let cluster;
let incr;
if (client === "ioredis") {
  cluster = new Redis.Cluster(seeds, SETTINGS.ioredis[setting]);
  cluster.on("error", () => {});
  cluster.on("node error", () => {});
  incr = (key) => cluster.incr(key);
  if (setting === "reqid") {
    incr = async (key) => (await cluster.call("CL.THROTTLE", key, "10", "10", "3600", "1", "REQID", key))[2];
  }
} else if (client === "node-redis") {
  cluster = createCluster({
    rootNodes: seeds.map((s) => ({ socket: { host: s.host, port: s.port } })),
    ...SETTINGS["node-redis"][setting],
  });
  cluster.on("error", () => {});
  cluster.on("node-error", () => {});
  await cluster.connect();
  incr = (key) => cluster.incr(key);
}

await incr(`${prefix}{fo}:ready`);
emit({ ev: "ready", t: now() });

let next = 0;
let stopping = false;
let pending = 0;
async function worker(w) {
  while (!stopping) {
    const op = next++;
    const t0 = now();
    pending++;
    try {
      const v = await incr(`${prefix}{fo}:${op}`);
      emit({ ev: "ok", op, w, t0, t1: now(), v: Number(v) });
    } catch (err) {
      emit({ ev: "err", op, w, t0, t1: now(), msg: describe(err) });
    } finally {
      pending--;
    }
    const left = PACE_MS - (now() - t0);
    if (left > 0) await sleep(left);
  }
}

async function stop() {
  if (stopping) return;
  stopping = true;
  const deadline = now() + SETTLE_MS;
  while (pending > 0 && now() < deadline) await sleep(10);
  emit({ ev: "done", t: now(), pending });
  process.exit(0);
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "stop") stop();
}).on("close", stop);
setTimeout(stop, HARD_LIMIT_MS).unref();

for (let w = 0; w < workers; w++) worker(w);
