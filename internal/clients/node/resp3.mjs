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

try {
  const io = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  io.on("error", () => {});
  await io.connect();
  const ioOut = await run("ioredis", (a) => io.call(...a));
  await io.quit();

  const nr = createClient({ url: `redis://${host}:${port}` });
  nr.on("error", () => {});
  await nr.connect();
  const nrOut = await run("node-redis", (a) => nr.sendCommand(a));
  await nr.quit();

  console.log(JSON.stringify({ ioredis: ioOut, "node-redis": nrOut }));
} catch (err) {
  console.error(String(err && err.stack || err));
  process.exit(1);
}
