// rate-limiter-flexible's RateLimiterRedis, unmodified, over ioredis (its
// default: a command defined with defineCommand, so EVALSHA, then EVAL on
// NOSCRIPT) or node-redis (useRedisPackage: EVAL every time; MULTI for
// get and block). Usage: node flexible.mjs ADDR ioredis|node-redis
import rlf from "rate-limiter-flexible";
import { errText, ioredis, nodeRedis, run } from "./common.mjs";

const { RateLimiterRedis, RateLimiterRes } = rlf;
const which = process.argv[3];
if (which !== "ioredis" && which !== "node-redis") {
  console.error("usage: node flexible.mjs ADDR ioredis|node-redis");
  process.exit(2);
}

// outcome is a RateLimiterRes (resolved or rejected) or an error.
function outcome(settled, v) {
  if (v instanceof RateLimiterRes) {
    return {
      settled, remaining: v.remainingPoints, consumed: v.consumedPoints,
      first: v.isFirstInDuration, before_next_ms: v.msBeforeNext,
    };
  }
  if (v === null) return { settled, res: null };
  if (typeof v === "boolean") return { settled, res: v };
  return { settled, err: errText(v) };
}

async function step(tr, name, promise) {
  try {
    tr.add(name, outcome("resolved", await promise));
  } catch (e) {
    tr.add(name, outcome("rejected", e));
  }
}

run(async (tr) => {
  const store = which === "ioredis" ? await ioredis() : await nodeRedis();
  const plain = await ioredis();
  const opts = { storeClient: store, useRedisPackage: which === "node-redis" };

  // 5 points a minute.
  const rl = new RateLimiterRedis({ ...opts, keyPrefix: "rlflx", points: 5, duration: 60 });
  for (let i = 1; i <= 6; i++) await step(tr, `consume alice ${i}`, rl.consume("alice"));
  await step(tr, "get alice", rl.get("alice"));
  await step(tr, "penalty alice 2", rl.penalty("alice", 2));
  await step(tr, "reward alice 4", rl.reward("alice", 4));
  await tr.readBack(plain, "stored alice", "rlflx:alice");
  await step(tr, "consume bob 2", rl.consume("bob", 2));
  await step(tr, "consume bob '3'", rl.consume("bob", "3"));
  await step(tr, "consume bob 1", rl.consume("bob", 1));
  await step(tr, "get nobody", rl.get("nobody"));
  // block: SET ... EX and PTTL in a MULTI.
  await step(tr, "block carol 30s", rl.block("carol", 30));
  await step(tr, "consume carol", rl.consume("carol"));
  await tr.readBack(plain, "stored carol", "rlflx:carol");
  // set: the same MULTI with the given points.
  await step(tr, "set dave 3 for 20s", rl.set("dave", 3, 20));
  await step(tr, "get dave", rl.get("dave"));
  await step(tr, "delete alice", rl.delete("alice"));
  await step(tr, "delete alice again", rl.delete("alice"));
  await step(tr, "get alice after delete", rl.get("alice"));

  // No duration: INCRBY and PTTL in a MULTI, the key never expires.
  const forever = new RateLimiterRedis({ ...opts, keyPrefix: "forever", points: 2, duration: 0 });
  for (let i = 1; i <= 3; i++) await step(tr, `consume forever ${i}`, forever.consume("erin"));
  await tr.readBack(plain, "stored forever", "forever:erin");

  // blockDuration: the consume that goes over blocks the key for 2 min.
  const blocking = new RateLimiterRedis({ ...opts, keyPrefix: "blocking", points: 2, duration: 10, blockDuration: 120 });
  for (let i = 1; i <= 4; i++) await step(tr, `consume blocking ${i}`, blocking.consume("frank"));
  await tr.readBack(plain, "stored blocking", "blocking:frank");

  // The script cache flushed under a running limiter.
  try {
    await plain.script("FLUSH");
    tr.add("script flush", {});
  } catch (e) {
    tr.add("script flush", { err: errText(e) });
  }
  await step(tr, "consume alice after script flush", rl.consume("alice"));
  await step(tr, "consume alice again", rl.consume("alice"));

  await store.quit();
  await plain.quit();
});
