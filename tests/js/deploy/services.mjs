// services.mjs — the real services the deploy tests run beside corvid
// (Debian's HAProxy and Prometheus), each started by the test on its own
// loopback ports and temp dir and stopped at the end, and the agent-like
// client they share.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

// The path of a program from PATH or /usr/sbin, or null. Without it a test
// is skipped with the reason, except in CI (CI=true), where it fails:
// scripts/install-deps.sh installs every one.
export function findProgram(name) {
  for (const dir of [...(process.env.PATH || '').split(':'), '/usr/sbin', '/sbin']) {
    const p = path.join(dir, name);
    if (dir && existsSync(p)) return p;
  }
  return null;
}

export function missing(name) {
  if (findProgram(name)) return false;
  const why = `${name} is not installed (scripts/install-deps.sh installs it)`;
  if (process.env.CI === 'true') throw new Error(why);
  return why;
}

// A free loopback port (bound then released: the services take it at once).
export async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// Polls fn (async, truthy when done) every step ms for up to ms.
export async function until(fn, ms, what, step = 100) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, step));
  }
}

// Starts a program; stop() sends SIGTERM and resolves to its exit code.
// Its output is kept (log()) for failure messages.
export function startProgram(bin, args, env = {}) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let log = '';
  const keep = (d) => { log += d; if (log.length > 200000) log = log.slice(-100000); };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r(code ?? signal)));
  return { proc, log: () => log, stop: async () => { proc.kill('SIGTERM'); return exited; }, exited };
}

// HAProxy in the foreground with deploy/haproxy/haproxy.cfg as shipped,
// its addresses from the environment; resolves once every replica is UP.
export async function startHaproxy(cfg, replicas) {
  const listen = await freePort(), stats = await freePort();
  const env = { CORVID_LISTEN: `127.0.0.1:${listen}`, CORVID_HAPROXY_STATS: `127.0.0.1:${stats}` };
  replicas.forEach((r, i) => { env[`CORVID_REPLICA_${i + 1}`] = `127.0.0.1:${r.port}`; });
  const hx = startProgram(findProgram('haproxy'), ['-f', cfg, '-db'], env);
  hx.url = `http://127.0.0.1:${listen}`;
  // The stats CSV: name,status of each server of the replicas' backend.
  hx.servers = async () => {
    const csv = await (await fetch(`http://127.0.0.1:${stats}/;csv`)).text();
    const rows = csv.split('\n').map((l) => l.split(','));
    const st = rows[0].indexOf('status');
    return Object.fromEntries(rows.filter((r) => r[0] === 'corvid_replicas' && r[1] !== 'BACKEND').map((r) => [r[1], r[st]]));
  };
  await until(async () => Object.values(await hx.servers()).filter((s) => s === 'UP').length === replicas.length,
    20000, `HAProxy to see ${replicas.length} replicas UP: ${hx.log()}`);
  return hx;
}

// One agent turn over OpenAI chat: { status, retryAfter, replica, reply,
// finish, prompt, cached, error }. headers carry the agent's identity.
export async function chat(url, headers, messages, extra = {}) {
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', temperature: 0, max_tokens: 16, messages, ...extra }),
  });
  const body = await r.json();
  return {
    status: r.status,
    retryAfter: r.headers.get('retry-after'),
    replica: r.headers.get('x-corvid-replica'),
    reply: body.choices?.[0]?.message?.content,
    finish: body.choices?.[0]?.finish_reason,
    prompt: body.usage?.prompt_tokens,
    cached: body.usage?.prompt_tokens_details?.cached_tokens,
    error: body.error,
  };
}
