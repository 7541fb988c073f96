// node-http-random: study 02's Node.js row, the shared contract of the study's fair rows,
// on plain node:http (no framework, no dependency):
//
//   GET /api/values/{id}   a fresh 1,024-character string per request, drawn from the seed's
//                          63-character alphabet with Math.random (V8's xorshift128+, one
//                          per isolate)
//   GET /api/values/fixed  1,024 characters generated once at start
//
// Both answer 200 with Content-Type text/plain; charset=utf-8 and Content-Length 1024; Node
// adds Date, Connection: keep-alive and Keep-Alive: timeout=5. Other paths answer 404,
// other methods 405. One process, one event loop, no cluster: the server gets what one
// process can use of the server CPUs, as the seed's single Kestrel and Iris processes did.
// HOST (default 127.0.0.1) and PORT (default 5000) give the listen address.
'use strict';

const http = require('node:http');

const ALPHABET = Buffer.from('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ', 'latin1');
const SIZE = 1024;
const HEADERS = { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': String(SIZE) };
const PREFIX = '/api/values/';

function randomBytes(n) {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) {
    b[i] = ALPHABET[Math.floor(Math.random() * ALPHABET.length)];
  }
  return b;
}

const fixed = randomBytes(SIZE);

const server = http.createServer((req, res) => {
  const url = req.url;
  // /api/values/{id}: exactly one non-empty segment after the prefix (no query string)
  if (!url.startsWith(PREFIX) || url.length === PREFIX.length || url.indexOf('/', PREFIX.length) !== -1
      || url.indexOf('?') !== -1) {
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': '9' });
    res.end('Not Found');
    return;
  }
  if (req.method !== 'GET') {
    res.writeHead(405, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': '18', Allow: 'GET' });
    res.end('Method Not Allowed');
    return;
  }
  res.writeHead(200, HEADERS);
  res.end(url === PREFIX + 'fixed' ? fixed : randomBytes(SIZE));
});

const host = process.env.HOST || '127.0.0.1';
const port = Number.parseInt(process.env.PORT || '5000', 10);
server.listen(port, host, () => {
  console.error(`node-http-random listening on ${host}:${port} (node ${process.version})`);
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => process.exit(0)); // keep-alive clients would hold server.close() open
}
