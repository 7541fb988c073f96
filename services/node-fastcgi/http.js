// node-fastcgi's plain-HTTP variant: the same handler as index.js over node:http, without
// nginx. The FastCGI variant runs one process per port behind nginx's round-robin upstream;
// a load generator loads one port, so here the processes share one port through Node's
// cluster module (the primary accepts and hands connections round-robin to WORKERS worker
// processes, Node's default on Linux). WORKERS defaults to 4, as the seed's 4 processes.
//
// Usage: node http.js   (HOST, PORT, WORKERS from the environment)
'use strict';

const cluster = require('node:cluster');
const http = require('node:http');
const { handler } = require('./index.js');

const host = process.env.HOST || '127.0.0.1';
const port = Number.parseInt(process.env.PORT || '8080', 10);
const workers = Number.parseInt(process.env.WORKERS || '4', 10);

if (cluster.isPrimary) {
  if (!Number.isInteger(workers) || workers < 1) {
    console.error(`http.js: WORKERS must be a positive integer, got ${process.env.WORKERS}`);
    process.exit(2);
  }
  let stopping = false;
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    console.error(`http.js: worker ${worker.process.pid} exited (${signal || code}); stopping`);
    stopping = true;
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM');
    process.exitCode = 1;
  });
  for (const sig of ['SIGTERM', 'SIGINT']) {
    process.on(sig, () => {
      stopping = true;
      for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM');
      process.exit(0);
    });
  }
} else {
  http.createServer(handler).listen(port, host, () => {
    console.log(`node http worker ${process.pid} listening on ${host}:${port} (HTTP, cluster)`);
  });
}
