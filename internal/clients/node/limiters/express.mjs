// express-rate-limit with rate-limit-redis's RedisStore over node-redis,
// unmodified: an express app on 127.0.0.1:0 driven with plain HTTP
// requests, then the store's own increment, get, decrement and resetKey.
// The store loads its two scripts with SCRIPT LOAD and runs them with
// EVALSHA (loading again on NOSCRIPT). Usage: node express.mjs ADDR
import express from "express";
import { rateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { errText, ioredis, nodeRedis, run } from "./common.mjs";

// The headers a client sees (draft-6 names), times as they are in seconds.
function headers(res) {
  const h = (n) => res.headers.get(n);
  const num = (n) => (h(n) === null ? null : Number(h(n)));
  return {
    status: res.status, policy: h("ratelimit-policy"), limit: num("ratelimit-limit"),
    remaining: num("ratelimit-remaining"), reset_s: num("ratelimit-reset"), retry_after_s: num("retry-after"),
  };
}

// info is what the store answers, its reset time relative to now.
function info(v) {
  if (!v) return { res: v ?? null };
  // A PTTL of -2 or -1 makes a reset time already past, by a millisecond
  // or so more by now: "past", not a duration.
  const inMs = v.resetTime instanceof Date ? v.resetTime.getTime() - Date.now() : null;
  return {
    total_hits: Number.isNaN(v.totalHits) ? "NaN" : v.totalHits,
    reset_in_ms: inMs !== null && inMs < 0 ? "past" : inMs,
  };
}

run(async (tr) => {
  const client = await nodeRedis();
  const plain = await ioredis();
  const logged = [];
  const logger = { error: (e, msg) => logged.push(`${msg ?? ""} ${errText(e)}`.trim()), warn: () => {} };
  const store = new RedisStore({ sendCommand: (...args) => client.sendCommand(args) });
  const limiter = rateLimit({
    windowMs: 60_000, limit: 3, standardHeaders: "draft-6", legacyHeaders: false, store, logger,
    keyGenerator: (req) => req.get("x-user") ?? "anonymous",
  });
  const app = express();
  app.use(limiter);
  app.get("/", (req, res) => res.send("ok"));
  // A store's failure reaches the client as a 500; its text is the body.
  app.use((err, req, res, next) => res.status(500).send(`error: ${errText(err)}`)); // eslint-disable-line no-unused-vars
  const server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  const url = `http://127.0.0.1:${server.address().port}/`;
  const get = async (name, user) => {
    try {
      const res = await fetch(url, { headers: { "x-user": user } });
      tr.add(name, { ...headers(res), body: (await res.text()).slice(0, 300) });
    } catch (e) {
      tr.add(name, { err: errText(e) });
    }
  };
  const call = async (name, promise, shape = info) => {
    try {
      tr.add(name, shape(await promise));
    } catch (e) {
      tr.add(name, { err: errText(e) });
    }
  };

  for (let i = 1; i <= 5; i++) await get(`GET alice ${i}`, "alice");
  await get("GET bob", "bob");
  await tr.readBack(plain, "stored alice", "rl:alice");
  await call("getKey alice", limiter.getKey("alice"));
  await call("decrement alice", store.decrement("alice"), () => ({}));
  await call("get alice after decrement", store.get("alice"));
  await call("resetKey alice", limiter.resetKey("alice"), () => ({}));
  await call("get alice after reset", store.get("alice"));
  await tr.readBack(plain, "stored alice after reset", "rl:alice");
  await get("GET alice after reset", "alice");

  // The store alone.
  await call("increment carol", store.increment("carol"));
  await call("increment carol again", store.increment("carol"));
  // A key without a TTL (set by hand) is taken as a new window.
  await plain.set("rl:dave", "7");
  await call("increment dave (no TTL)", store.increment("dave"));
  await tr.readBack(plain, "stored dave", "rl:dave");
  // The script cache flushed: EVALSHA answers NOSCRIPT, the store loads
  // the script again.
  try {
    await plain.script("FLUSH");
    tr.add("script flush", {});
  } catch (e) {
    tr.add("script flush", { err: errText(e) });
  }
  await call("increment carol after script flush", store.increment("carol"));
  await call("get carol after script flush", store.get("carol"));

  tr.add("logged", { errors: logged });
  await new Promise((resolve) => server.close(resolve));
  await client.quit();
  await plain.quit();
});
