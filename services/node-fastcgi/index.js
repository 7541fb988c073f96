// node-fastcgi: the seed's NodeJS FastCGI application (bolner/FastCGI-bench NodeJS/index.js).
//
// The seed's handler, unchanged: every request is answered 200 with Content-Type text/html
// and the 62-byte body below; node-fastcgi's config {maxConns: 2000, maxReqs: 2000} as the
// seed (only reported in FCGI_GET_VALUES answers, not enforced by the library).
//
// Usage, as the seed's `node index.js 7070`: node index.js PORT [NODE_MODULES_DIR]
// One process, one port. Differences from the seed: it listens on $HOST (default 127.0.0.1)
// instead of every interface, and loads node-fastcgi from NODE_MODULES_DIR when given (the
// local runtime's build cache; the Docker image has its own /app/node_modules).
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const BODY = '<!DOCTYPE html><html><body><h1>Hello World!</h1></body></html>';

// the seed's responder
function handler(req, res) {
  res.writeHead(200, { 'Content-Type': 'text/html' });
  res.end(BODY);
}

module.exports = { BODY, handler };

if (require.main === module) {
  const port = Number.parseInt(process.argv[2] || process.env.PORT || '', 10);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    console.error('usage: node index.js PORT [NODE_MODULES_DIR]');
    process.exit(2);
  }
  const modulesDir = process.argv[3];
  const load = modulesDir ? createRequire(path.join(path.resolve(modulesDir), '..', 'package.json')) : require;
  const fcgi = load('node-fastcgi');
  const host = process.env.HOST || '127.0.0.1';
  fcgi.createServer(handler, null, null, { maxConns: 2000, maxReqs: 2000 }).listen(port, host, () => {
    console.log(`node-fastcgi ${process.pid} listening on ${host}:${port} (FastCGI)`);
  });
}
