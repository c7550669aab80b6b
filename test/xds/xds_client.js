/* The gRPC team's xDS client, for side-by-side runs with grit (issue 27;
 * SPEC XD-01, XD-02): @grpc/grpc-js with @grpc/grpc-js-xds registered,
 * making unary calls of /lb.Svc/Call (raw bytes, as the grpcio backends
 * of test/peers/health_server.py serve it) on an xds:/// target. The
 * bootstrap comes from GRPC_XDS_BOOTSTRAP or GRPC_XDS_BOOTSTRAP_CONFIG, as
 * for grit.
 *
 *   node xds_client.js [--target xds:///svc] --calls N [--metadata k=v]...
 *     makes N calls one after the other, prints one JSON line, exits:
 *     {"event":"calls","n":N,"backends":{"b0":n,...},"statuses":{"0":n,...},
 *      "message":"the first failure's message, or null"}
 *   node xds_client.js [--target xds:///svc] --serve
 *     keeps one channel; prints "READY 0" once registered; then reads one
 *     JSON command a line on stdin, {"calls":N,"metadata":{"k":"v"},
 *     "timeout_ms":T}, and answers each with the line above (plus its
 *     "seq"); exits when stdin closes. Optional fields of a command:
 *     "method" (default /lb.Svc/Call), "request" (the request bytes as a
 *     string, default empty), "parallel": true (the N calls all started
 *     at once instead of one after the other, and the command started at
 *     once, without waiting for earlier ones to end), "detail": true (the
 *     answer also has "results": one {"code","answer","message","ms"} a
 *     call, in the order the calls ended; "ms" from the call's start to
 *     its end).
 *
 * Every call waits for ready (as grit's side does) with a deadline of
 * timeout_ms (10 s by default). Loopback only: the target's control plane
 * and backends are the test's. */
'use strict';
const readline = require('readline');
const grpc = require('@grpc/grpc-js');
const grpcXds = require('@grpc/grpc-js-xds');

grpcXds.register();

const args = process.argv.slice(2);
let target = 'xds:///svc';
let calls = 0;
let serve = false;
const metadata = {};
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--target') target = args[++i];
  else if (a === '--calls') calls = Number(args[++i]);
  else if (a === '--serve') serve = true;
  else if (a === '--metadata') {
    const kv = args[++i] || '';
    const eq = kv.indexOf('=');
    if (eq <= 0) {
      process.stderr.write(`--metadata wants k=v, got "${kv}"\n`);
      process.exit(2);
    }
    metadata[kv.substring(0, eq)] = kv.substring(eq + 1);
  } else {
    process.stderr.write(`unknown argument "${a}"\n`);
    process.exit(2);
  }
}
if (!serve && !(Number.isInteger(calls) && calls > 0)) {
  process.stderr.write('usage: xds_client.js [--target T] (--calls N | --serve)\n');
  process.exit(2);
}

const client = new grpc.Client(target, grpc.credentials.createInsecure());
const identity = (b) => b;

/* One call; resolves to {backend, code, message, ms}. */
function call(md, timeoutMs, method, request) {
  return new Promise((resolve) => {
    const meta = new grpc.Metadata({ waitForReady: true });
    for (const [k, v] of Object.entries(md || {})) meta.set(k, String(v));
    const t0 = process.hrtime.bigint();
    const ms = () => Number((process.hrtime.bigint() - t0) / 1000000n);
    client.makeUnaryRequest(method || '/lb.Svc/Call', identity, identity,
      Buffer.from(request || ''), meta, { deadline: Date.now() + timeoutMs },
      (err, resp) => {
        if (err) resolve({ backend: null, code: err.code, message: err.details || err.message, ms: ms() });
        else resolve({ backend: resp.toString(), code: 0, message: null, ms: ms() });
      });
  });
}

async function run(n, md, timeoutMs, opts) {
  const o = opts || {};
  const out = { event: 'calls', n, backends: {}, statuses: {}, message: null };
  const results = [];
  const note = (r) => {
    out.statuses[r.code] = (out.statuses[r.code] || 0) + 1;
    if (r.backend !== null) out.backends[r.backend] = (out.backends[r.backend] || 0) + 1;
    else if (out.message === null) out.message = r.message;
    results.push({ code: r.code, answer: r.backend, message: r.message, ms: r.ms });
  };
  if (o.parallel) {
    const all = [];
    for (let i = 0; i < n; i++) all.push(call(md, timeoutMs, o.method, o.request).then(note));
    await Promise.all(all);
  } else {
    for (let i = 0; i < n; i++) note(await call(md, timeoutMs, o.method, o.request));
  }
  if (o.detail) out.results = results;
  return out;
}

function write(o) { process.stdout.write(JSON.stringify(o) + '\n'); }

if (!serve) {
  run(calls, metadata, 10000).then((o) => {
    write(o);
    client.close();
    process.exit(0);
  });
} else {
  process.stdout.write('READY 0\n');
  const rl = readline.createInterface({ input: process.stdin });
  let seq = 0;
  let chain = Promise.resolve();
  rl.on('line', (line) => {
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (e) {
      write({ event: 'error', error: `not JSON: ${line}` });
      return;
    }
    const s = ++seq;
    const go = () => run(Number(cmd.calls) || 1, cmd.metadata,
      Number(cmd.timeout_ms) || 10000, cmd).then((o) => {
      o.seq = s;
      write(o);
    });
    /* Commands run one after the other, in order; a parallel one starts
     * at once, beside those still running. */
    if (cmd.parallel) chain = Promise.all([chain, go()]);
    else chain = chain.then(go);
  });
  rl.on('close', () => {
    chain.then(() => {
      client.close();
      process.exit(0);
    });
  });
}
