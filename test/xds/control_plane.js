/* A test xDS control plane on @grpc/grpc-js (issue 27; SPEC XD-01): it
 * serves envoy.service.discovery.v3.AggregatedDiscoveryService/
 * StreamAggregatedResources (state of the world, v3) from a scenario file,
 * with envoy's own .proto files as @grpc/grpc-js-xds ships them.
 *
 *   node control_plane.js SCENARIO.json [--port N]
 *
 * The scenario: {"resources": [R...], "updates": {"NAME": [R...]}} where
 * each R is an xDS resource in protobuf JSON with its "@type" (nested Anys
 * also carry "@type"); an update replaces the resources of the same type
 * and name ({"@type": T, "name": N, "@delete": true} removes one).
 * stdin, one command a line: "update NAME" applies an update and pushes it
 * to every stream. stdout, one line each: "PORT n" first, then JSON events:
 * {"event":"request", "type", "version", "nonce", "names", "error",
 * "stream" (its number), "agent" (the Node's user_agent_name)} for
 * every DiscoveryRequest, {"event":"response", "type", "version", "nonce",
 * "names", "stream", "t_ms"} for every response sent,
 * {"event":"updated", "name"}.
 * It exits when stdin closes. Loopback only. */
'use strict';
const path = require('path');
const fs = require('fs');
const readline = require('readline');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const xdsDir = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
const includeDirs = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate']
  .map((d) => path.join(xdsDir, 'deps', d));
const files = [
  'envoy/service/discovery/v3/ads.proto',
  'envoy/config/listener/v3/listener.proto',
  'envoy/config/route/v3/route.proto',
  'envoy/config/cluster/v3/cluster.proto',
  'envoy/config/endpoint/v3/endpoint.proto',
  'envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto',
  'envoy/extensions/filters/http/router/v3/router.proto',
];

const root = new protobuf.Root();
root.resolvePath = (origin, target) => {
  for (const d of includeDirs) {
    const p = path.join(d, target);
    if (fs.existsSync(p)) return p;
  }
  return protobuf.util.path.resolve(origin, target);
};
root.loadSync(files, { keepCase: true });
root.resolveAll();

/* Protobuf JSON with "@type" objects -> {type_url, value} Anys, bottom up. */
function toAny(obj) {
  const t = obj['@type'];
  const typeName = t.substring(t.lastIndexOf('/') + 1);
  const T = root.lookupType(typeName);
  const plain = {};
  for (const [k, v] of Object.entries(obj)) {
    if (k[0] !== '@') plain[k] = encodeNested(v);
  }
  const err = T.verify(T.fromObject(plain));
  if (err) throw new Error(`${typeName}: ${err}`);
  return { type_url: t, value: Buffer.from(T.encode(T.fromObject(plain)).finish()) };
}
function encodeNested(v) {
  if (Array.isArray(v)) return v.map(encodeNested);
  if (v && typeof v === 'object') {
    if (v['@type']) return toAny(v);
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = encodeNested(x);
    return o;
  }
  return v;
}

const args = process.argv.slice(2);
/* ${NAME} in the scenario is replaced by the environment's NAME (the
 * backends' ports, chosen at test time). */
const scenario = JSON.parse(fs.readFileSync(args[0], 'utf8').replace(
  /\$\{([A-Z0-9_]+)\}/g, (m, n) => (n in process.env ? process.env[n] : m)));
let port = 0;
const pi = args.indexOf('--port');
if (pi >= 0) port = Number(args[pi + 1]);

/* state: type_url -> Map(name -> resource JSON); a version per type. */
const state = new Map();
const versions = new Map();
function put(r) {
  const t = r['@type'];
  if (!state.has(t)) state.set(t, new Map());
  const name = r.name !== undefined ? r.name : r.cluster_name;
  if (r['@delete']) state.get(t).delete(name);
  else state.get(t).set(name, r);
  versions.set(t, (versions.get(t) || 0) + 1);
  return t;
}
for (const r of scenario.resources || []) put(r);

function log(o) { process.stdout.write(JSON.stringify(o) + '\n'); }

const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(files[0], {
  keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
  includeDirs,
}));
const streams = new Set();
let nonceCounter = 0;
let streamCounter = 0;

/* Send |t| to |s|: the watched names that exist (all of them for a
 * wildcard subscription of LDS/CDS). */
function send(s, t) {
  const sub = s.subs.get(t);
  if (!sub) return;
  const have = state.get(t) || new Map();
  const names = sub.size ? [...sub].filter((n) => have.has(n)) : [...have.keys()];
  const version = String(versions.get(t) || 0);
  const nonce = String(++nonceCounter);
  let resources;
  try {
    resources = names.map((n) => toAny(have.get(n)));
  } catch (e) {
    log({ event: 'scenario_error', error: String(e) });
    return;
  }
  s.sent.set(t, { version, nonce, names: names.join(',') });
  s.call.write({ version_info: version, resources, type_url: t, nonce });
  /* t_ms: the wall clock (ms, fractional) once the response is written,
   * for bench/xds-cost's update-to-in-force figure. */
  log({
    event: 'response', type: t, version, nonce, names, stream: s.id,
    t_ms: performance.timeOrigin + performance.now(),
  });
}

function ads(call) {
  const s = { call, subs: new Map(), sent: new Map(), id: ++streamCounter };
  streams.add(s);
  call.on('data', (req) => {
    const t = req.type_url;
    /* Which client: the stream's number and the user_agent_name of the
     * Node its first request carried ("grit", "gRPC Node Pure JS"). */
    if (req.node && s.agent === undefined) s.agent = req.node.user_agent_name;
    log({
      event: 'request', type: t, version: req.version_info,
      nonce: req.response_nonce, names: req.resource_names,
      error: req.error_detail ? req.error_detail.message : null,
      node: req.node ? req.node.id : null,
      stream: s.id, agent: s.agent === undefined ? null : s.agent,
    });
    const names = new Set(req.resource_names);
    const prev = s.subs.get(t);
    const same = prev && prev.size === names.size && [...names].every((n) => prev.has(n));
    s.subs.set(t, names);
    const last = s.sent.get(t);
    /* An ACK or NACK of the last response with the same names: nothing to
     * send. A new subscription, or a first request: send what there is. */
    if (same && last && req.response_nonce === last.nonce) return;
    if (last && req.response_nonce && req.response_nonce !== last.nonce && same) return;
    send(s, t);
  });
  const end = () => { streams.delete(s); };
  call.on('end', () => { end(); call.end(); });
  call.on('error', end);
  call.on('cancelled', end);
}

const server = new grpc.Server();
server.addService(
  pkg.envoy.service.discovery.v3.AggregatedDiscoveryService.service,
  { StreamAggregatedResources: ads });
server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => {
  if (err) {
    process.stderr.write(`bind: ${err}\n`);
    process.exit(1);
  }
  process.stdout.write(`PORT ${p}\n`);
});

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const m = /^update (\S+)$/.exec(line.trim());
  if (!m) return;
  const u = (scenario.updates || {})[m[1]];
  if (!u) {
    log({ event: 'scenario_error', error: `no update ${m[1]}` });
    return;
  }
  const types = new Set(u.map(put));
  log({ event: 'updated', name: m[1] });
  for (const s of streams) for (const t of types) send(s, t);
});
rl.on('close', () => {
  server.forceShutdown();
  process.exit(0);
});
