// toolcalls.test.mjs — tool calls over every wire, checked by each wire's
// official SDK. The recorded model outputs of testdata/toolcalls/hermes.jsonl
// are substituted for the sampler's text (the test-only fake backend; see
// tests/server/fake_backend.h), go through the server's pipeline (stop
// strings, the streaming output parser, the wire encoder) and must come out
// as the expected calls — names and arguments as JSON values — and content,
// streamed and not, on OpenAI chat, OpenAI responses and Anthropic messages.
//
// Cases used: `match: exact` whose every <tool_call> is closed and whose
// reasoning, if any, opens with <think> (the fake's parser is a hermes
// parser; the real one comes with the tool-call layer).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { repo, startServer, say, testdata } from './helpers.mjs';

const cases = readFileSync(path.join(testdata, 'toolcalls', 'hermes.jsonl'), 'utf8')
  .split('\n').filter(Boolean).map((l) => JSON.parse(l))
  .filter((c) => c.match === 'exact' && c.mode !== 'partial' && !c.text.includes('</think>')
    && (c.text.match(/<tool_call>/g) || []).length === (c.text.match(/<\/tool_call>/g) || []).length
    && c.options?.parallel_tool_calls !== false);

const tools = (c) => {
  const names = [...new Set((c.expected_calls || []).map((x) => x.name))];
  return names.map((name) => ({ name, description: name, parameters: { type: 'object', properties: {} } }));
};
const want = (c) => (c.expected_calls || []).map((x) => ({ name: x.name, args: x.arguments }));
const content = (c) => (c.expected_content ?? '').trim();

// Two backends: the byte-level fake, and stories260K wrapped so that its
// chat template, tokenizer (the recorded text becomes the model's own token
// ids) and streaming detokenizer serve, with only the sampler substituted.
const corvid = process.env.CV_RELEASE_BIN || path.join(repo, 'build', 'corvid');
const backends = [
  { name: 'byte-level fake backend', args: async () => [] },
  {
    name: 'stories260K with substituted tokens',
    skip: !existsSync(corvid) && `${corvid} is not built`,
    args: async (dir) => {
      const gguf = path.join(dir, 's.gguf');
      const m = path.join(testdata, 'models');
      execFileSync(corvid, ['import', 'llama2c', path.join(m, 'stories260K.bin'), path.join(m, 'tok512.bin'), '-o', gguf]);
      return ['--model', gguf, '--ctx', '4096'];
    },
  },
];

for (const backend of backends) describe(`tool calls from recorded model output, over every wire (${backend.name})`, { skip: backend.skip }, () => {
  let srv, oai, ant, dir;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'corvid-tc-'));
    srv = await startServer(await backend.args(dir));
    oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    ant = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await srv.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  });

  test('enough cases were selected', () => assert.ok(cases.length >= 15, `${cases.length} cases`));

  cases.forEach((c, i) => {
    const label = `hermes #${i} (${c.id ?? c.source?.slice(-30)})`;
    const user = `call tools ${say(c.text)}`;
    const ctools = tools(c);

    test(`${label}: chat completions, streamed and not`, async () => {
      const body = { model: 'm', messages: [{ role: 'user', content: user }], tools: ctools.map((t) => ({ type: 'function', function: t })) };
      if (!ctools.length) delete body.tools;
      for (const r of [await oai.chat.completions.create(body), await oai.chat.completions.stream(body).finalChatCompletion()]) {
        const m = r.choices[0].message;
        assert.deepEqual((m.tool_calls || []).map((t) => ({ name: t.function.name, args: JSON.parse(t.function.arguments) })), want(c));
        assert.equal((m.content ?? '').trim(), content(c));
        assert.equal(r.choices[0].finish_reason, want(c).length ? 'tool_calls' : 'stop');
        const ids = (m.tool_calls || []).map((t) => t.id);
        assert.equal(new Set(ids).size, ids.length, 'call ids are unique');
      }
    });

    test(`${label}: responses, streamed and not`, async () => {
      const body = { model: 'm', input: user, tools: ctools.map((t) => ({ type: 'function', ...t })) };
      for (const r of [await oai.responses.create(body), await oai.responses.stream(body).finalResponse()]) {
        const calls = r.output.filter((o) => o.type === 'function_call');
        assert.deepEqual(calls.map((o) => ({ name: o.name, args: JSON.parse(o.arguments) })), want(c));
        assert.equal(r.output_text.trim(), content(c));
      }
    });

    test(`${label}: anthropic messages, streamed and not`, async () => {
      const body = { model: 'm', max_tokens: 4096, messages: [{ role: 'user', content: user }], tools: ctools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters })) };
      for (const m of [await ant.messages.create(body), await ant.messages.stream(body).finalMessage()]) {
        const calls = m.content.filter((b) => b.type === 'tool_use');
        assert.deepEqual(calls.map((b) => ({ name: b.name, args: b.input })), want(c));
        assert.equal(m.content.filter((b) => b.type === 'text').map((b) => b.text).join('').trim(), content(c));
        assert.equal(m.stop_reason, want(c).length ? 'tool_use' : 'end_turn');
      }
    });
  });
});

// Output detection through the production parser (fake_serve --parser auto:
// no syntax known, as for a model without a template): corvid's own cases
// for the shapes it recovers (bare, listed and fenced JSON calls, whole-reply
// Python lists, other syntaxes' markers) and the near-misses that must stay
// content, with their full tool schemas, on every wire through its SDK,
// streamed and not. Cases that name another chosen format need a server in
// that syntax; the C test (test_server_toolcalls) runs those.
const detect = readFileSync(path.join(repo, 'tests', 'chat', 'toolcall', 'fixtures', 'detect.jsonl'), 'utf8')
  .split('\n').filter(Boolean).map((l) => JSON.parse(l))
  .filter((c) => c.format === 'auto' || c.format === 'hermes');

describe('tool calls in any syntax, found by output detection, over every wire', () => {
  let srv, oai, ant;
  before(async () => {
    srv = await startServer(['--parser', 'auto']);
    oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    ant = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
  });
  after(async () => assert.equal(await srv.stop(), 0));

  test('enough detection cases were selected', () => assert.ok(detect.length >= 40, `${detect.length} cases`));

  detect.forEach((c) => {
    const user = `call tools ${say(c.text)}`;
    const fns = (c.tools || []).map((t) => t.function);
    const label = `${c.id} (${c.notes})`;

    test(`${label}: chat completions, streamed and not`, async () => {
      const body = { model: 'm', messages: [{ role: 'user', content: user }] };
      if (fns.length) body.tools = fns.map((f) => ({ type: 'function', function: f }));
      for (const r of [await oai.chat.completions.create(body), await oai.chat.completions.stream(body).finalChatCompletion()]) {
        const m = r.choices[0].message;
        assert.deepEqual((m.tool_calls || []).map((t) => ({ name: t.function.name, args: JSON.parse(t.function.arguments) })), want(c));
        assert.equal((m.content ?? '').trim(), content(c));
      }
    });

    test(`${label}: responses, streamed and not`, async () => {
      const body = { model: 'm', input: user, tools: fns.map((f) => ({ type: 'function', ...f })) };
      for (const r of [await oai.responses.create(body), await oai.responses.stream(body).finalResponse()]) {
        const calls = r.output.filter((o) => o.type === 'function_call');
        assert.deepEqual(calls.map((o) => ({ name: o.name, args: JSON.parse(o.arguments) })), want(c));
        assert.equal(r.output_text.trim(), content(c));
      }
    });

    test(`${label}: anthropic messages, streamed and not`, async () => {
      const body = { model: 'm', max_tokens: 4096, messages: [{ role: 'user', content: user }], tools: fns.map((f) => ({ name: f.name, description: f.name, input_schema: f.parameters })) };
      if (!fns.length) delete body.tools;
      for (const m of [await ant.messages.create(body), await ant.messages.stream(body).finalMessage()]) {
        const calls = m.content.filter((b) => b.type === 'tool_use');
        assert.deepEqual(calls.map((b) => ({ name: b.name, args: b.input })), want(c));
        assert.equal(m.content.filter((b) => b.type === 'text').map((b) => b.text).join('').trim(), content(c));
      }
    });
  });
});
