// Bottleneck's clustering (datastore "ioredis"), unmodified: two limiters
// with one id share a reservoir, concurrency and queue through Bottleneck's
// Lua scripts (hashes, sorted sets, PUBLISH from scripts), and learn of
// freed capacity and of each other's messages over SUBSCRIBE on a second
// connection. Usage: node bottleneck.mjs ADDR
import Bottleneck from "bottleneck";
import Redis from "ioredis";
import { addr, errText, ioredis, run } from "./common.mjs";

function clientOptions() {
  if (addr.startsWith("/")) return { path: addr };
  const i = addr.lastIndexOf(":");
  return { host: addr.slice(0, i), port: Number(addr.slice(i + 1)) };
}

function limiter(extra) {
  const l = new Bottleneck({
    id: "bn-test", datastore: "ioredis", Redis, clientOptions: clientOptions(), timeout: 60000, ...extra,
  });
  l.on("error", () => {});
  return l;
}

// within resolves with p's value, or rejects after ms.
function within(p, ms, what) {
  return Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(what + ": not within " + ms + " ms")), ms))]);
}

run(async (tr) => {
  const plain = await ioredis();
  const a = limiter({ clearDatastore: true, reservoir: 3, maxConcurrent: 2 });
  await within(a.ready(), 5000, "a ready");
  const b = limiter({});
  await within(b.ready(), 5000, "b ready");
  tr.add("ready", { a_reservoir: await a.currentReservoir(), b_reservoir: await b.currentReservoir() });

  // Five jobs on a, a reservoir of three: three run, two wait.
  const ran = [];
  const release = [];
  const jobs = [1, 2, 3, 4, 5].map((n) =>
    a.schedule(() => new Promise((res) => { ran.push(n); release.push(res); })).then(() => n));
  await within(new Promise((res) => { const t = setInterval(() => { if (ran.length >= 2) { clearInterval(t); res(); } }, 10); }), 5000, "two jobs running");
  tr.add("two running (maxConcurrent)", { ran: ran.length, running: await a.running() });
  while (release.length) release.shift()();
  await within(new Promise((res) => { const t = setInterval(() => { if (ran.length >= 3) { clearInterval(t); res(); } }, 10); }), 5000, "third job");
  while (release.length) release.shift()();
  await new Promise((r) => setTimeout(r, 200));
  tr.add("reservoir spent", { ran: ran.length, reservoir: await a.currentReservoir(), queued: await b.clusterQueued() });

  // b refills the shared reservoir: a hears of the capacity (pub/sub)
  // and runs its two queued jobs.
  await b.incrementReservoir(2);
  await within(new Promise((res) => { const t = setInterval(() => { if (ran.length >= 5) { clearInterval(t); res(); } }, 10); }), 5000, "queued jobs after incrementReservoir on b");
  while (release.length) release.shift()();
  tr.add("refilled from b", { done: (await Promise.all(jobs)).sort(), reservoir: await b.currentReservoir() });

  // A job on b, the reservoir empty: it waits until a refills it.
  const late = b.schedule(() => Promise.resolve("late"));
  await new Promise((r) => setTimeout(r, 200));
  tr.add("b waits", { queued_a: await a.clusterQueued(), queued_b: await b.clusterQueued() });
  await a.incrementReservoir(1);
  tr.add("b runs after a refills", { result: await within(late, 5000, "b's job"), reservoir: await a.currentReservoir() });

  // Messages between the limiters (PUBLISH on a's channel, b subscribed).
  const heard = new Promise((res) => b.on("message", res));
  await a.publish("hello from a");
  tr.add("message", { got: await within(heard, 5000, "b's message") });

  // Settings shared through the datastore.
  await a.updateSettings({ reservoir: 10, maxConcurrent: 3 });
  tr.add("settings", { b_reservoir: await b.currentReservoir(), running: await b.running(), done: await b.done() });

  // What Bottleneck keeps in the datastore.
  const keys = (await plain.keys("b_bn-test*")).sort();
  const types = {};
  for (const k of keys) types[k] = await plain.type(k);
  tr.add("stored", { types });
  // A limiter's own channel is named after its random client id.
  const channels = (await plain.pubsub("CHANNELS", "b_bn-test*")).map((c) => c.replace(/^b_bn-test_.+$/, "b_bn-test_<client>")).sort();
  tr.add("channels", { channels, numsub: await plain.pubsub("NUMSUB", "b_bn-test") });

  await a.disconnect(false);
  await b.disconnect(false);
  await new Promise((r) => setTimeout(r, 100));
  tr.add("after disconnect", { numsub: await plain.pubsub("NUMSUB", "b_bn-test") });
  plain.disconnect();
});
