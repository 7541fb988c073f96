// node-fastify-logger: study 04's extra Node.js row (not in the seed).
//
// GET / answers 200 with the seed's 38-byte body "Hello, World! This is a cool web test!";
// fastify sends a string as text/plain; charset=utf-8. Other paths and methods answer
// fastify's 404.
//
// fastify({ logger: true }): pino at level info, JSON lines to stdout. fastify's default
// request logging writes TWO lines per request ("incoming request" when it arrives,
// "request completed" with the response time when it is done), plus one "Server listening"
// line at start. HOST and PORT give the listen address. One process, one event loop.
//
// Usage: node server.js [NODE_MODULES_DIR]. The local runtime passes the node_modules that
// build.js installed into the build cache; in the container (no argument) the usual lookup
// finds /app/node_modules.
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const modulesDir = process.argv[2];
const load = modulesDir ? createRequire(path.join(path.resolve(modulesDir), '..', 'package.json')) : require;
const fastify = load('fastify')({ logger: true });

const BODY = 'Hello, World! This is a cool web test!';

fastify.get('/', async () => BODY);

const host = process.env.HOST || '127.0.0.1';
const port = Number.parseInt(process.env.PORT || '8080', 10);

fastify.listen({ host, port }).catch((err) => {
  fastify.log.error(err);
  process.exit(1);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    fastify.close().then(() => process.exit(0), () => process.exit(1));
  });
}
