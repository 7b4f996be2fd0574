// Connects to Sluice with ioredis and node-redis at their defaults (both
// negotiate RESP3 with HELLO 3) and runs the Redis subset and the decision
// commands. Usage: node resp3.mjs HOST PORT. Prints one JSON object per
// client, each command's reply as the client returns it; exits 1 on error.
import Redis from "ioredis";
import { createClient } from "redis";

const [host, port] = process.argv.slice(2);

// plain turns client-specific reply shapes (Map, Buffer) into JSON.
const plain = (v) => {
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), plain(x)]));
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object" && !(v instanceof Buffer)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v === undefined ? null : v;
};

const script = [
  ["PING"],
  ["SET", "k", "v"],
  ["GET", "k"],
  ["GET", "missing"],
  ["INCR", "n"],
  ["CL.THROTTLE", "KEY", "4", "1", "60"],
  ["SW.CHECK", "KEY:sw", "10", "60"],
  ["LIMIT.INFO", "KEY"],
  ["CONFIG", "GET", "maxmemory-policy"],
  ["DEL", "k", "n"],
];

async function run(name, call) {
  const out = {};
  for (const cmd of script) {
    const args = cmd.map((a) => (a.startsWith("KEY") ? a.replace("KEY", name) : a));
    out[args.join(" ")] = plain(await call(args));
  }
  const info = String(await call(["CLIENT", "INFO"]));
  out.resp = (info.match(/resp=(\d)/) || [])[1] || null;
  return out;
}

// within resolves with p's value, or rejects after 5 s.
const within = (p, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(what + ": no answer in 5 s")), 5000))]);

// pubsub subscribes on a second connection (to a channel and a pattern),
// publishes twice from the first, and returns the messages in order and
// what PUBLISH answered.
async function pubsub(subscribe, publish, wanted) {
  const got = [];
  let done;
  const all = new Promise((res) => { done = res; });
  const note = (m) => { got.push(m); if (got.length === wanted) done(); };
  await subscribe(note);
  const counts = [await publish("news", "n1"), await publish("newsroom", "n2")];
  await within(all, "pub/sub messages");
  return { counts, messages: got };
}

try {
  const io = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  io.on("error", () => {});
  await io.connect();
  const ioOut = await run("ioredis", (a) => io.call(...a));
  const ioSub = io.duplicate();
  ioSub.on("error", () => {});
  ioOut.pubsub = await pubsub(async (note) => {
    ioSub.on("message", (ch, m) => note(`${ch}:${m}`));
    ioSub.on("pmessage", (p, ch, m) => note(`${p}|${ch}:${m}`));
    await ioSub.subscribe("news");
    await ioSub.psubscribe("news*");
  }, (ch, m) => io.publish(ch, m), 3);
  ioSub.disconnect();
  await io.quit();

  const nr = createClient({ url: `redis://${host}:${port}` });
  nr.on("error", () => {});
  await nr.connect();
  const nrOut = await run("node-redis", (a) => nr.sendCommand(a));
  const nrSub = nr.duplicate();
  nrSub.on("error", () => {});
  await nrSub.connect();
  nrOut.pubsub = await pubsub(async (note) => {
    await nrSub.subscribe("news", (m, ch) => note(`${ch}:${m}`));
    await nrSub.pSubscribe("news*", (m, ch) => note(`news*|${ch}:${m}`));
  }, (ch, m) => nr.publish(ch, m), 3);
  await nrSub.quit();
  await nr.quit();

  console.log(JSON.stringify({ ioredis: ioOut, "node-redis": nrOut }));
} catch (err) {
  console.error(String(err && err.stack || err));
  process.exit(1);
}
