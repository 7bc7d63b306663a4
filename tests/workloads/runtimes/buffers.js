// buffers.js - node workload for tests/integration/test_runtimes.py: Buffers
// allocated from a named JS function (their backing stores are malloc'd by
// node's ArrayBuffer allocator, called from V8 builtins and JIT code).
// Speaks the handshake of ../handshake.h: "ready PID", a line, the
// allocations, "done", a line, exit.
'use strict';
const readline = require('readline');

const ROUNDS = 20;
const PER_ROUND = 500;
const kept = [];

function allocateNamedBuffers(n) {
  for (let i = 0; i < n; i++) {
    const b = Buffer.alloc(65536 + (i % 7) * 4096);
    if (i % 4 === 0) kept.push(b);
  }
}

const lines = readline.createInterface({input: process.stdin});
let seen = 0;
lines.on('line', () => {
  if (seen++ === 0) {
    for (let r = 0; r < ROUNDS; r++) allocateNamedBuffers(PER_ROUND);
    process.stdout.write('done\n');
  } else {
    lines.close();
  }
});
lines.on('close', () => process.exit(0));
process.stdout.write(`ready ${process.pid}\n`);
