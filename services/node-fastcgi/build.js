// Build step of node-fastcgi: `node build.js OUT_DIR`: `npm ci` of the committed
// package-lock.json in OUT_DIR/app (the benchlib build cache, never the clone); prints the
// installed node-fastcgi, fastcgi-stream and bufferlist versions.
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
for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(__dirname, f), path.join(app, f));
execFileSync('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], { cwd: app, stdio: 'inherit' });
for (const dep of ['node-fastcgi', 'fastcgi-stream', 'bufferlist']) {
  const v = JSON.parse(fs.readFileSync(path.join(app, 'node_modules', dep, 'package.json'), 'utf8')).version;
  console.log(`${dep} ${v}`);
}
