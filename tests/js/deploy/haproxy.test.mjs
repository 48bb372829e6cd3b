// haproxy.test.mjs — two `corvid serve` replicas (stories260K) behind the
// real HAProxy from Debian, on loopback, with deploy/haproxy/haproxy.cfg as
// shipped:
//   - an agent's six turns (a Claude Code session header) land on one replica
//     and turns 2-6 are served from its prefix cache;
//   - Codex's session-id, OpenCode's x-session-affinity and the API key pin
//     too, a session header wins over the key, and no header is round robin;
//   - one replica stopped mid-run (SIGTERM): it refuses new work with 503 +
//     Retry-After, its in-flight stream completes, its sessions' next turns
//     move to the other and succeed (HAProxy retries the drain's 503s there),
//     the survivor's sessions never move, and the survivor served exactly the
//     turns sent to it (nothing lost or served twice); the stopped replica
//     exits 0 and writes its cache file.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { corvid, importStories260K, repo, startServer } from '../server/helpers.mjs';
import { chat, missing, startHaproxy, until } from './services.mjs';

const skip = (!existsSync(corvid) && `the release binary ${corvid} is not built`) || missing('haproxy');
const cfg = path.join(repo, 'deploy', 'haproxy', 'haproxy.cfg');
const SYSTEM = 'You are a careful coding agent. Read the files, run the tests, and change only what the task needs. '
  .repeat(4);

// The replica's served-request count for chat (its own /metrics).
async function served(r) {
  const text = await (await fetch(`${r.url}/metrics`)).text();
  const m = text.match(/^corvid_http_requests_total\{route="chat_completions",status="200"\} (\d+)$/m);
  return m ? Number(m[1]) : 0;
}

describe('two replicas behind HAProxy', { skip }, () => {
  let dir, gguf, hx;
  const reps = {}; // replica1, replica2 as HAProxy names them
  const caches = {};
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'corvid-haproxy-'));
    gguf = importStories260K(dir);
    for (const name of ['replica1', 'replica2']) {
      caches[name] = path.join(dir, `cache-${name}`);
      reps[name] = await startServer(['serve', gguf, '--port', '0', '--parallel', '2', '--threads', '1', '--ctx', '4096',
        '--kv-memory', '64M', '--draft', '0', '--cache-dir', caches[name], '--drain-timeout', '60'], corvid);
    }
    hx = await startHaproxy(cfg, [reps.replica1, reps.replica2]);
  });
  after(async () => {
    await hx?.stop();
    for (const r of Object.values(reps)) if (r.alive !== false) await r.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  // A conversation that grows by the reply and a new user message each turn.
  async function turns(headers, n, history = [{ role: 'system', content: SYSTEM }]) {
    const out = [];
    for (let i = 0; i < n; i++) {
      history.push({ role: 'user', content: `Step ${history.length}: look at file number ${history.length} and say what it does.` });
      const t = await chat(hx.url, headers, history);
      assert.equal(t.status, 200, JSON.stringify(t.error));
      history.push({ role: 'assistant', content: t.reply });
      out.push(t);
    }
    return { out, history };
  }

  // Session ids that HAProxy places on each replica (found by trying seeds).
  const sessions = {};
  test('an agent\'s six turns land on one replica and turns 2-6 are served from its prefix cache', async () => {
    const { out } = await turns({ 'X-Claude-Code-Session-Id': 'agent-a' }, 6);
    assert.ok(reps[out[0].replica], `unknown replica ${out[0].replica}`);
    for (const t of out) assert.equal(t.replica, out[0].replica);
    for (const t of out.slice(1)) assert.ok(t.cached > 0, `turn served without cache: ${JSON.stringify(t)}`);
    const later = out.slice(1);
    const ratio = later.reduce((a, t) => a + t.cached, 0) / later.reduce((a, t) => a + t.prompt, 0);
    assert.ok(ratio >= 0.8, `later turns' hit rate ${ratio}`);
    sessions[out[0].replica] = 'agent-a';
  });

  test('each agent\'s header pins its requests, a session beats the key, and none is round robin', async () => {
    for (let seed = 0; Object.keys(sessions).length < 2 && seed < 64; seed++) {
      const id = `agent-b${seed}`;
      const t = await chat(hx.url, { 'X-Claude-Code-Session-Id': id }, [{ role: 'user', content: 'hi' }], { max_tokens: 1 });
      if (!sessions[t.replica]) sessions[t.replica] = id;
    }
    assert.equal(Object.keys(sessions).length, 2, 'some session lands on each replica');
    const where = async (h) => {
      const seen = new Set();
      for (let i = 0; i < 3; i++) seen.add((await chat(hx.url, h, [{ role: 'user', content: 'hi' }], { max_tokens: 1 })).replica);
      return [...seen];
    };
    for (const h of [{ 'session-id': 'codex-1' }, { 'x-session-affinity': 'opencode-1' }, { authorization: 'Bearer key-1' },
      { 'x-api-key': 'key-2' }]) assert.equal((await where(h)).length, 1, `${JSON.stringify(h)} moved`);
    // Keys that land on different replicas; with a session id both follow it.
    const keyOn = {};
    for (let seed = 0; Object.keys(keyOn).length < 2 && seed < 64; seed++) {
      const [r] = await where({ authorization: `Bearer k${seed}` });
      keyOn[r] ??= `Bearer k${seed}`;
    }
    assert.equal(Object.keys(keyOn).length, 2);
    for (const [rep, id] of Object.entries(sessions)) {
      for (const key of Object.values(keyOn)) assert.deepEqual(await where({ 'X-Claude-Code-Session-Id': id, authorization: key }), [rep]);
    }
    const none = new Set();
    for (let i = 0; i < 6; i++) none.add((await chat(hx.url, {}, [{ role: 'user', content: 'hi' }], { max_tokens: 1 })).replica);
    assert.equal(none.size, 2, 'requests without a header go to both replicas');
  });

  test('a replica stopped mid-run finishes its stream, its sessions move and succeed, the survivor\'s stay', async () => {
    const victim = Object.keys(sessions).find((r) => sessions[r] === 'agent-a');
    const survivor = victim === 'replica1' ? 'replica2' : 'replica1';
    const hv = { 'X-Claude-Code-Session-Id': sessions[victim] }, hs = { 'X-Claude-Code-Session-Id': sessions[survivor] };
    const before = await served(reps[survivor]);
    // A long answer on the victim, streamed; SIGTERM once it has begun.
    const res = await fetch(`${hx.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', ...hv },
      body: JSON.stringify({ model: 'm', max_tokens: 3900, stream: true, messages: [{ role: 'user', content: 'Once upon a time' }] }),
    });
    assert.equal(res.headers.get('x-corvid-replica'), victim);
    const reader = res.body.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    const exit = reps[victim].stop();
    reps[victim].alive = false;
    const health = await until(async () => {
      const h = await (await fetch(`${reps[victim].url}/health`)).json();
      return h.status === 'draining' && h;
    }, 5000, 'the drain', 5);
    assert.ok(health.active_requests >= 1, 'the stream was still running when the drain began');
    // Asked directly, the draining replica refuses new work with 503 + Retry-After.
    const refused = await chat(reps[victim].url, {}, [{ role: 'user', content: 'hi' }], { max_tokens: 1 });
    assert.equal(refused.status, 503);
    assert.equal(refused.retryAfter, '1');
    assert.match(refused.error.message, /draining/);
    // Next turns of both sessions while the victim drains and after it left.
    const moved = [], stayed = [];
    for (let i = 0; i < 3; i++) {
      const a = await chat(hx.url, hv, [{ role: 'user', content: `turn ${i}` }], { max_tokens: 4 });
      const b = await chat(hx.url, hs, [{ role: 'user', content: `turn ${i}` }], { max_tokens: 4 });
      assert.equal(a.status, 200, JSON.stringify(a.error));
      assert.equal(b.status, 200, JSON.stringify(b.error));
      moved.push(a.replica);
      stayed.push(b.replica);
    }
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    assert.match(text, /"finish_reason":"length"/, 'the in-flight answer ran to its end');
    assert.doesNotMatch(text, /"error"/);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
    assert.equal(await exit, 0, 'the drained replica exits 0');
    assert.ok(readdirSync(caches[victim]).some((f) => f.endsWith('.cvkv')), 'it saved its prefix cache');
    assert.deepEqual(moved, [survivor, survivor, survivor]);
    assert.deepEqual(stayed, [survivor, survivor, survivor]);
    assert.equal(await served(reps[survivor]), before + 6, 'the survivor served each turn once');
  });
});
