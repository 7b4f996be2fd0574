// rate-limiter-flexible's RateLimiterRedis over ioredis, the way its README
// sets it up: points 100 per duration 1 s, consume(key) with 1 point.
// Usage: node rlflex.cjs PROXY_PORT SOCK
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
(async () => {
  const [, , port, sock] = process.argv;
  const admin = new Redis({ path: sock });
  await admin.script('flush');
  const client = new Redis({ port: +port, host: '127.0.0.1' });
  const rl = new RateLimiterRedis({ storeClient: client, points: 100, duration: 1 });
  const show = (r) => console.log(JSON.stringify(r));
  const key = 'sluice-bench:rlflex:0';
  await rl.consume(key).then(show, show); // first call on the connection: EVAL
  await rl.consume(key).then(show, show); // EVALSHA
  await admin.script('flush');
  await rl.consume(key).then(show, show); // EVALSHA, NOSCRIPT, EVAL
  await client.quit();
  await admin.quit();
})();
