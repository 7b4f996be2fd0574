// Shared by the limiter scenarios (internal/limiters runs them against
// redis-server and Sluice and compares what they print). A scenario takes
// the server's address as its first argument, a unix socket path (starting
// with "/") or HOST:PORT, and prints its transcript: a JSON array of steps,
// each {"step": name, ...outcomes}. A library's failure is an outcome (an
// "err" field), not a crash; the program exits non-zero only when the
// scenario itself cannot run.
//
// Field names ending in _ms or _s are times (compared with a tolerance);
// no step holds an absolute time.
import Redis from "ioredis";
import { createClient } from "redis";

export const addr = process.argv[2];
if (!addr) {
  console.error("usage: node SCENARIO.mjs ADDR (a socket path or HOST:PORT)");
  process.exit(2);
}

function hostPort() {
  const i = addr.lastIndexOf(":");
  return { host: addr.slice(0, i), port: Number(addr.slice(i + 1)) };
}

// ioredis as an application sets it up, failing fast rather than
// reconnecting forever.
export async function ioredis() {
  const where = addr.startsWith("/") ? { path: addr } : hostPort();
  const c = new Redis({ ...where, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  c.on("error", () => {});
  await c.connect();
  return c;
}

// node-redis at its defaults (RESP3 where the server speaks it).
export async function nodeRedis() {
  const socket = addr.startsWith("/") ? { path: addr } : hostPort();
  const c = createClient({ socket: { ...socket, reconnectStrategy: false } });
  c.on("error", () => {});
  await c.connect();
  return c;
}

// errText is an error (or a rejection with any value) as a step holds it.
export function errText(e) {
  if (e instanceof Error) return e.message;
  return String(e);
}

export class Transcript {
  constructor() {
    this.steps = [];
  }

  add(step, fields = {}) {
    this.steps.push({ step, ...fields });
  }

  // readBack records a key as stored, with the same commands on both
  // servers: its type, string value, TTL and PTTL.
  async readBack(client, step, key) {
    try {
      const [type, value, ttl, pttl] = await Promise.all([
        client.type(key), client.get(key).catch((e) => "error: " + errText(e)), client.ttl(key), client.pttl(key),
      ]);
      this.add(step, { type, value, ttl_s: ttl, pttl_ms: pttl });
    } catch (e) {
      this.add(step, { err: errText(e) });
    }
  }

  print() {
    process.stdout.write(JSON.stringify(this.steps) + "\n");
  }
}

// run runs a scenario with a watchdog: whatever happens, a transcript is
// printed and the process ends.
export function run(scenario) {
  const tr = new Transcript();
  const unhandled = [];
  process.on("unhandledRejection", (e) => unhandled.push(errText(e)));
  const watchdog = setTimeout(() => {
    tr.add("watchdog", { err: "the scenario did not finish in 40 s" });
    tr.print();
    process.exit(0);
  }, 40000);
  scenario(tr)
    .catch((e) => tr.add("scenario", { err: errText(e) }))
    .finally(() => {
      clearTimeout(watchdog);
      if (unhandled.length) tr.add("unhandled rejections", { errs: unhandled });
      tr.print();
      process.exit(0);
    });
}
