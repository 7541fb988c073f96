// node-fastify-mongo: study 01's API in Node.js (an extra row beyond the seed).
//
//   GET /helloWorld  -> {"message":"Hello world!"} (application/json)
//   GET /users/:id   -> {"id":1,"name":"Arthur","surname":"Morgan","email":"..."} read from
//                       MongoDB (db "mongo", collection "users"); 404 unknown id, 400 bad id,
//                       500 database error
//
// One process, fastify without its logger (no per-request log line), and one MongoClient
// connected at start whose pool serves every request: the shared "fair" contract of the
// study's implementations. HOST/PORT give the listen address, CONNECTION_STRING the MongoDB
// URL. Locally the dependencies come from the build cache: `--deps-dir DIR` names the folder
// holding node_modules (see build.js); in the container they sit beside server.js.
'use strict';

const depsIdx = process.argv.indexOf('--deps-dir');
const load = depsIdx > 0
  ? (name) => require(require.resolve(name, { paths: [process.argv[depsIdx + 1]] }))
  : require;
const Fastify = load('fastify');
const { MongoClient } = load('mongodb');

async function main() {
  const url = process.env.CONNECTION_STRING;
  if (!url) {
    console.error('CONNECTION_STRING not set');
    process.exit(1);
  }
  const client = new MongoClient(url);
  await client.connect();
  await client.db('admin').command({ ping: 1 });
  const users = client.db('mongo').collection('users');

  const app = Fastify({ logger: false });
  app.get('/helloWorld', async () => ({ message: 'Hello world!' }));
  app.get('/users/:id', async (request, reply) => {
    const id = Number(request.params.id);
    if (!Number.isInteger(id)) {
      return reply.code(400).send({ error: 'id must be an integer' });
    }
    let doc;
    try {
      doc = await users.findOne({ _id: id });
    } catch (err) {
      return reply.code(500).send({ error: String(err && err.message) });
    }
    if (doc === null) {
      return reply.code(404).send({ error: 'user not found' });
    }
    return { id: doc._id, name: doc.name, surname: doc.surname, email: doc.email };
  });

  const close = async () => {
    await app.close();
    await client.close();
    process.exit(0);
  };
  process.on('SIGTERM', close);
  process.on('SIGINT', close);

  const host = process.env.HOST || '127.0.0.1';
  const port = Number(process.env.PORT || 8080);
  await app.listen({ host, port });
  console.log(`node-fastify-mongo listening on ${host}:${port} (node ${process.version})`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
