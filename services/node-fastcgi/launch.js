// Starts the seed's FastCGI processes: one `node index.js PORT` per port in $PORTS (the
// runtime's `[run] ports = 4` gives four, as the seed's `node index.js 7070` ... 7073), all
// children of this launcher (in its process group, cgroup or container). SIGTERM/SIGINT are
// passed on; when one process exits on its own, the others are stopped and the launcher
// exits with its code.
//
// Usage: node launch.js [NODE_MODULES_DIR]   (HOST, PORTS or PORT from the environment)
'use strict';

const path = require('node:path');
const { spawn } = require('node:child_process');

const ports = (process.env.PORTS || process.env.PORT || '').split(',').filter(Boolean);
if (ports.length === 0) {
  console.error('launch.js: set PORTS (p1,p2,...) or PORT');
  process.exit(2);
}
const extra = process.argv[2] ? [process.argv[2]] : [];
const children = ports.map((port) =>
  spawn(process.execPath, [path.join(__dirname, 'index.js'), port, ...extra], { stdio: 'inherit' }));
let stopping = false;
function stopAll(signal) {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill(signal);
}
for (const c of children) {
  c.on('exit', (code, signal) => {
    if (!stopping) {
      stopping = true;
      console.error(`launch.js: FastCGI process ${c.pid} exited (${signal || code}); stopping the others`);
      process.exitCode = code || 1;
      stopAll('SIGTERM');
    }
  });
}
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    stopping = true;
    stopAll(sig);
  });
}
