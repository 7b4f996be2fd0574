// Capturing proxy: listens on 127.0.0.1:PORT, forwards every connection to
// the redis-server on unix socket SOCK, and writes the bytes the client sent
// on its first connection to OUT, unchanged.
const net = require('net');
const fs = require('fs');
const [, , port, sock, outPath] = process.argv;
let first = true;
net.createServer((c) => {
  const out = first ? fs.createWriteStream(outPath) : null;
  first = false;
  const s = net.connect(sock);
  c.on('data', (d) => { if (out) out.write(d); s.write(d); });
  s.on('data', (d) => c.write(d));
  c.on('close', () => { if (out) out.end(); s.end(); });
  s.on('close', () => c.end());
}).listen(+port, '127.0.0.1', () => console.log('listening'));
