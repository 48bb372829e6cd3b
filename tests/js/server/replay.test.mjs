// replay.test.mjs — every recorded request of real agent traffic
// (testdata/clients: Claude Code, Codex CLI, opencode, Qwen Code, the openai
// and anthropic SDKs) is sent to a real server with its recorded method,
// path, query, headers and body; each must get a 200 whose body the matching
// official SDK parses (streams through the SDK's own SSE decoder and stream
// accumulators), with the answer the recording fake gave (a call to the
// client's shell tool while no tool result is in the history, else text).
// Claude Code's /context burst of count_tokens requests is sent in parallel
// and its latencies are reported (not asserted: the machine is shared).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { Stream } from 'openai/core/streaming';
import { ChatCompletionStream } from 'openai/lib/ChatCompletionStream';
import { ResponseStream } from 'openai/lib/responses/ResponseStream';
import { Stream as AStream } from '@anthropic-ai/sdk/core/streaming';
import { MessageStream } from '@anthropic-ai/sdk/lib/MessageStream';
import { startServer, testdata } from './helpers.mjs';

const KEY = 'replay-key';
const root = path.join(testdata, 'clients');
const fixtures = [];
for (const dir of readdirSync(root).sort()) {
  const d = path.join(root, dir);
  if (!statSync(d).isDirectory()) continue;
  for (const f of readdirSync(d).sort()) if (f.endsWith('.json')) fixtures.push({ name: `${dir}/${f}`, rec: JSON.parse(readFileSync(path.join(d, f), 'utf8')) });
}

const DROP = new Set(['host', 'content-length', 'connection', 'transfer-encoding', 'accept-encoding']);

function send(url, rec) {
  const headers = {};
  for (const [k, v] of rec.headers) {
    const lk = k.toLowerCase();
    if (DROP.has(lk)) continue;
    if (lk === 'authorization') headers[k] = `Bearer ${KEY}`;
    else if (lk === 'x-api-key') headers[k] = KEY;
    else headers[k] = v;
  }
  const q = rec.query ? `?${rec.query}` : '';
  const init = { method: rec.method, headers };
  if (rec.body != null && rec.method !== 'GET' && rec.method !== 'HEAD') init.body = JSON.stringify(rec.body);
  return fetch(`${url}${rec.path}${q}`, init);
}

// What the recording fake answered: a tool call (to which tool) or text.
function expectedKind(rec) {
  const m = /^(tool_use|tool_calls|function_call):(\S+)/.exec(rec.response.kind || '');
  return m ? { tool: m[2] } : { text: true };
}

async function parse(rec, resp) {
  const ac = new AbortController();
  const { path: p } = rec;
  const stream = rec.body?.stream === true;
  if (p === '/v1/chat/completions') {
    if (!stream) return { kind: 'chat', v: await resp.json() };
    const s = ChatCompletionStream.fromReadableStream(Stream.fromSSEResponse(resp, ac).toReadableStream());
    return { kind: 'chat', v: await s.finalChatCompletion() };
  }
  if (p === '/v1/responses') {
    if (!stream) return { kind: 'responses', v: await resp.json() };
    const s = ResponseStream.fromReadableStream(Stream.fromSSEResponse(resp, ac).toReadableStream());
    return { kind: 'responses', v: await s.finalResponse() };
  }
  if (p === '/v1/messages') {
    if (!stream) return { kind: 'messages', v: await resp.json() };
    const s = MessageStream.fromReadableStream(AStream.fromSSEResponse(resp, ac).toReadableStream());
    return { kind: 'messages', v: await s.finalMessage() };
  }
  if (p === '/v1/messages/count_tokens' || p === '/v1/models') return { kind: p, v: await resp.json() };
  return { kind: 'other', v: await resp.text() };
}

function check(name, rec, { kind, v }) {
  const want = expectedKind(rec);
  if (kind === 'chat') {
    const msg = v.choices[0].message;
    if (want.tool) {
      assert.equal(msg.tool_calls?.[0]?.function?.name, want.tool, name);
      assert.equal(typeof JSON.parse(msg.tool_calls[0].function.arguments), 'object', name);
      assert.equal(v.choices[0].finish_reason, 'tool_calls', name);
    } else {
      assert.match(msg.content, /3 files/, name);
    }
  } else if (kind === 'responses') {
    assert.equal(v.status, 'completed', name);
    if (want.tool) assert.equal(v.output.find((o) => o.type === 'function_call')?.name, want.tool, name);
    else assert.match(v.output.filter((o) => o.type === 'message').map((o) => o.content[0].text).join(''), /3 files/, name);
  } else if (kind === 'messages') {
    assert.equal(v.type, 'message', name);
    if (want.tool) {
      const tu = v.content.find((b) => b.type === 'tool_use');
      assert.equal(tu?.name, want.tool, name);
      assert.equal(typeof tu.input, 'object', name);
      assert.equal(v.stop_reason, 'tool_use', name);
    } else {
      assert.match(v.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), /3 files/, name);
    }
  } else if (kind === '/v1/messages/count_tokens') {
    assert.ok(Number.isInteger(v.input_tokens) && v.input_tokens > 0, name);
  } else if (kind === '/v1/models') {
    assert.equal(v.data[0].id, 'fake-bytes', name);
  }
}

describe('replay of recorded client traffic', () => {
  let srv;
  before(async () => { srv = await startServer(['--api-key', KEY]); });
  after(async () => assert.equal(await srv.stop(), 0));

  test('the fixtures are there', () => assert.ok(fixtures.length >= 40, `${fixtures.length} fixtures`));

  for (const { name, rec } of fixtures) {
    test(`${name}: ${rec.method} ${rec.path} gets a 200 the SDK parses`, async () => {
      const resp = await send(srv.url, rec);
      assert.equal(resp.status, 200, `${name}: ${resp.status} ${rec.method === 'HEAD' ? '' : await resp.clone().text()}`);
      check(name, rec, await parse(rec, resp));
    });
  }

  test('Claude Code\'s /context burst of count_tokens, in parallel: latency reported', async (t) => {
    const burst = fixtures.filter((f) => f.name.startsWith('claude-code-context/') && f.rec.path.endsWith('count_tokens'));
    assert.ok(burst.length >= 14);
    const times = [];
    for (let round = 0; round < 5; round++) {
      const res = await Promise.all(burst.map(async ({ rec }) => {
        const t0 = performance.now();
        const r = await send(srv.url, rec);
        const v = await r.json();
        const ms = performance.now() - t0;
        assert.equal(r.status, 200);
        assert.ok(v.input_tokens > 0);
        return ms;
      }));
      times.push(...res);
    }
    times.sort((a, b) => a - b);
    const q = (p) => times[Math.min(times.length - 1, Math.floor(p * times.length))].toFixed(1);
    t.diagnostic(`count_tokens burst: ${burst.length} parallel requests x 5 rounds; ms median ${q(0.5)} p90 ${q(0.9)} max ${q(1)}`);
    console.log(`count_tokens burst: ${burst.length} parallel x 5 rounds: median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms`);
  });
});
