// rate-limit-redis (express-rate-limit's Redis store) over node-redis, the
// way its README sets it up, with windowMs 1000; increment(key) is what
// express-rate-limit calls on every request.
// Usage: node rlr.mjs PROXY_PORT SOCK
import { createClient } from 'redis';
import { RedisStore } from 'rate-limit-redis';
const [, , port, sock] = process.argv;
const admin = createClient({ socket: { path: sock } });
await admin.connect();
await admin.scriptFlush();
const client = createClient({ url: `redis://127.0.0.1:${port}` });
await client.connect();
const store = new RedisStore({ sendCommand: (...args) => client.sendCommand(args) });
await store.init({ windowMs: 1000 }); // SCRIPT LOAD increment, SCRIPT LOAD get
const key = 'sluice-bench:rate-limit-redis:0';
console.log(JSON.stringify(await store.increment(key))); // EVALSHA
console.log(JSON.stringify(await store.increment(key))); // EVALSHA
await admin.scriptFlush();
console.log(JSON.stringify(await store.increment(key))); // EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA
await client.quit();
await admin.quit();
