// Build step of node-fastify-mongo: `node build.js OUT_DIR`.
//
// Copies package.json and the committed package-lock.json to OUT_DIR/app and runs `npm ci`
// there (production dependencies only), so node_modules lives in the benchlib build cache,
// never inside the clone. server.js loads from there (`--deps-dir OUT_DIR/app`, in service.toml).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const out = process.argv[2];
if (!out) {
  console.error('usage: node build.js OUT_DIR');
  process.exit(2);
}
const app = path.resolve(out, 'app');
fs.mkdirSync(app, { recursive: true });
for (const f of ['package.json', 'package-lock.json']) {
  fs.copyFileSync(path.join(__dirname, f), path.join(app, f));
}
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
execFileSync(npm, ['ci', '--omit=dev', '--no-audit', '--no-fund'], { cwd: app, stdio: 'inherit' });
for (const dep of ['fastify', 'mongodb']) {
  const v = JSON.parse(fs.readFileSync(path.join(app, 'node_modules', dep, 'package.json'), 'utf8')).version;
  console.log(`${dep} ${v}`);
}
