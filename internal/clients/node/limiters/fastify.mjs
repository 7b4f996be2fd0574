// @fastify/rate-limit with its Redis store over ioredis, unmodified: a
// fastify app driven with fastify.inject. The store defines two commands
// with ioredis's defineCommand (EVALSHA, then EVAL on NOSCRIPT): INCR with
// PEXPIRE on the first hit (or on every refused one with
// continueExceeding, or doubling with exponentialBackoff), and a read
// (GET, PTTL). Usage: node fastify.mjs ADDR
import Fastify from "fastify";
import rateLimit from "@fastify/rate-limit";
import { errText, ioredis, run } from "./common.mjs";

// What a client sees: the status, the rate-limit headers (seconds), and
// the error body without its wording of the wait ("retry in 1 minute").
function seen(res) {
  const h = (n) => (res.headers[n] === undefined ? null : Number(res.headers[n]));
  const out = {
    status: res.statusCode, limit: h("x-ratelimit-limit"), remaining: h("x-ratelimit-remaining"),
    reset_s: h("x-ratelimit-reset"), retry_after_s: h("retry-after"),
  };
  if (res.statusCode !== 200) {
    try {
      const b = JSON.parse(res.body);
      out.body = { statusCode: b.statusCode, error: b.error, code: b.code ?? null, retry: /^Rate limit exceeded, retry in /.test(b.message) };
      // Any other failure (a store's error) is shown as it is.
      if (!out.body.retry) out.body.message = b.message;
    } catch {
      out.body = res.body.slice(0, 200);
    }
  } else {
    out.body = res.body.slice(0, 200);
  }
  return out;
}

run(async (tr) => {
  const redis = await ioredis();
  const plain = await ioredis();
  const app = Fastify({ logger: false });
  await app.register(rateLimit, {
    redis, max: 3, timeWindow: 60_000, skipOnError: false,
    keyGenerator: (req) => req.headers["x-user"] ?? "anonymous",
  });
  const check = app.createRateLimit();
  app.get("/", async () => "ok");
  app.get("/continue", { config: { rateLimit: { max: 2, timeWindow: "30 seconds", continueExceeding: true } } }, async () => "ok");
  app.get("/backoff", { config: { rateLimit: { max: 1, timeWindow: 2000, exponentialBackoff: true } } }, async () => "ok");
  app.get("/ban", { config: { rateLimit: { max: 1, timeWindow: 60_000, ban: 1 } } }, async () => "ok");
  // Reads the global limit's state without counting (the store's read).
  app.get("/status", { config: { rateLimit: false } }, async (req) => {
    const r = await check(req, { increment: false });
    return { remaining: r.remaining, exceeded: r.isExceeded, ttl_ms: r.ttl, ttl_s: r.ttlInSeconds };
  });
  await app.ready();

  const get = async (name, url, user) => {
    try {
      const res = await app.inject({ method: "GET", url, headers: { "x-user": user } });
      const out = seen(res);
      if (url === "/status" && res.statusCode === 200) out.body = JSON.parse(res.body);
      tr.add(name, out);
    } catch (e) {
      tr.add(name, { err: errText(e) });
    }
  };

  await get("status alice before", "/status", "alice");
  for (let i = 1; i <= 5; i++) await get(`GET / alice ${i}`, "/", "alice");
  await get("status alice", "/status", "alice");
  await get("GET / bob", "/", "bob");
  await tr.readBack(plain, "stored alice", "fastify-rate-limit-alice");

  for (let i = 1; i <= 4; i++) await get(`GET /continue ${i}`, "/continue", "alice");
  await tr.readBack(plain, "stored continue", "fastify-rate-limit-GET/continue-alice");

  for (let i = 1; i <= 5; i++) await get(`GET /backoff ${i}`, "/backoff", "alice");
  await tr.readBack(plain, "stored backoff", "fastify-rate-limit-GET/backoff-alice");

  for (let i = 1; i <= 4; i++) await get(`GET /ban ${i}`, "/ban", "alice");

  // The script cache flushed: ioredis's EVALSHA answers NOSCRIPT and it
  // sends EVAL.
  try {
    await plain.script("FLUSH");
    tr.add("script flush", {});
  } catch (e) {
    tr.add("script flush", { err: errText(e) });
  }
  await get("GET / carol after script flush", "/", "carol");
  await get("status carol after script flush", "/status", "carol");

  await app.close();
  await redis.quit();
  await plain.quit();
});
