// Connects to Sluice over TLS with ioredis, as an application would, and
// makes one decision. Usage: node tls.mjs HOST PORT CA [CERT KEY]
// Prints the decision as JSON; exits 1 on any error.
import fs from "node:fs";
import Redis from "ioredis";

const [host, port, ca, cert, key] = process.argv.slice(2);
const tls = { ca: fs.readFileSync(ca) };
if (cert) {
  tls.cert = fs.readFileSync(cert);
  tls.key = fs.readFileSync(key);
}
const client = new Redis({ host, port: Number(port), tls, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
client.on("error", () => {});
try {
  await client.connect();
  const reply = await client.call("CL.THROTTLE", "ioredis:tls", "4", "1", "60");
  console.log(JSON.stringify(reply));
  await client.quit();
} catch (err) {
  console.error(String(err));
  process.exit(1);
}
