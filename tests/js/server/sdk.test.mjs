// sdk.test.mjs — the official clients (npm openai 6.49.0, @anthropic-ai/sdk
// 1.14.0 and 0.137.0) against a real server process: models, chat
// (streaming and not, tool calls, reasoning), legacy completions, responses
// (streaming and not, previous_response_id), messages (streaming and not,
// tool_use, thinking, stop sequences), count_tokens, auth with both header
// styles, every error shape through the SDK's own error classes, context
// overflow, 413, and a client that drops a stream.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import Anthropic0 from 'anthropic-sdk-0x';
import { startServer, say } from './helpers.mjs';

const bashTool = {
  type: 'function',
  function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
};
const anthBash = { name: 'Bash', description: 'Run a shell command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } };

describe('without an API key', () => {
  let srv, oai, ant;
  before(async () => {
    srv = await startServer(['--keepalive-ms', '200']);
    oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    ant = new Anthropic({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => assert.equal(await srv.stop(), 0, 'graceful stop exits 0'));

  test('models list through both SDKs', async () => {
    const ids = [];
    for await (const m of oai.models.list()) ids.push(m.id);
    assert.deepEqual(ids, ['fake-bytes']);
    const m = await oai.models.retrieve('fake-bytes');
    assert.equal(m.object, 'model');
    const aids = [];
    for await (const x of ant.models.list()) aids.push(x.id);
    assert.deepEqual(aids, ['fake-bytes']);
  });

  test('chat completion, not streamed', async () => {
    const r = await oai.chat.completions.create({ model: 'local-model', messages: [{ role: 'user', content: 'How many files?' }] });
    assert.equal(r.choices[0].message.content, 'There are 3 files in this directory: a.txt, b.py and notes.md.');
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.model, 'local-model');
    assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);
  });

  test('chat stream with usage: role chunk, deltas, finish, usage chunk', async () => {
    const stream = await oai.chat.completions.create({
      model: 'm', stream: true, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: [{ type: 'text', text: say('héllo wörld ✓') }] }],
    });
    let text = '';
    let finish = null;
    let usage = null;
    let first = null;
    for await (const c of stream) {
      if (!first) first = c;
      if (c.choices.length) {
        text += c.choices[0].delta.content ?? '';
        finish = c.choices[0].finish_reason ?? finish;
      }
      if (c.usage) usage = c.usage;
    }
    assert.equal(first.choices[0].delta.role, 'assistant');
    assert.equal(text, 'héllo wörld ✓');
    assert.equal(finish, 'stop');
    assert.equal(typeof usage.prompt_tokens_details.cached_tokens, 'number');
  });

  test('chat stream helper assembles a tool call', async () => {
    const s = oai.chat.completions.stream({
      model: 'm', tools: [bashTool], messages: [{ role: 'user', content: 'List the files' }],
    });
    const r = await s.finalChatCompletion();
    const call = r.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'bash');
    assert.deepEqual(JSON.parse(call.function.arguments), { command: 'ls -la' });
    assert.match(call.id, /^call_/);
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    // The tool result round trip: tool content as an array of text parts (Qwen Code style).
    const r2 = await oai.chat.completions.create({
      model: 'm', tools: [bashTool],
      messages: [
        { role: 'user', content: 'List the files' },
        { role: 'assistant', content: null, tool_calls: [call], refusal: null, parsed: null },
        { role: 'tool', tool_call_id: call.id, content: [{ type: 'text', text: 'a.txt b.py notes.md' }] },
      ],
    });
    assert.match(r2.choices[0].message.content, /3 files/);
  });

  test('chat reasoning arrives as reasoning_content', async () => {
    const r = await oai.chat.completions.create({ model: 'm', reasoning_effort: 'high', messages: [{ role: 'user', content: 'hi' }] });
    assert.match(r.choices[0].message.reasoning_content, /list/);
    assert.match(r.choices[0].message.content, /3 files/);
    assert.ok(r.usage.completion_tokens_details.reasoning_tokens > 0);
  });

  test('legacy completions, not streamed and streamed', async () => {
    const r = await oai.completions.create({ model: 'm', prompt: 'Once', max_tokens: 9, echo: true });
    assert.equal(r.choices[0].text, 'Once Once upo');
    assert.equal(r.choices[0].finish_reason, 'length');
    const s = await oai.completions.create({ model: 'm', prompt: [79, 110, 99, 101], stream: true, max_tokens: 100 });
    let t = '';
    for await (const c of s) t += c.choices[0]?.text ?? '';
    assert.equal(t, ' Once upon a time there was a little fox.');
  });

  test('responses, not streamed, then continued with previous_response_id', async () => {
    const r1 = await oai.responses.create({ model: 'm', instructions: 'Be brief.', input: 'List the files', tools: [{ type: 'function', name: 'bash', parameters: bashTool.function.parameters }, { type: 'web_search' }] });
    const call = r1.output.find((o) => o.type === 'function_call');
    assert.equal(call.name, 'bash');
    assert.deepEqual(JSON.parse(call.arguments), { command: 'ls -la' });
    const r2 = await oai.responses.create({
      model: 'm', previous_response_id: r1.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'a.txt b.py notes.md' }],
      tools: [{ type: 'function', name: 'bash', parameters: bashTool.function.parameters }],
    });
    assert.match(r2.output_text, /3 files/);
    // The stored history was rendered: the second prompt holds the first turn.
    assert.ok(r2.usage.input_tokens > r1.usage.input_tokens, `${r2.usage.input_tokens} > ${r1.usage.input_tokens}`);
    await assert.rejects(
      oai.responses.create({ model: 'm', previous_response_id: 'resp_missing', input: 'x' }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && /resp_missing/.test(e.message),
    );
  });

  test('responses stream helper: events in order and the final response', async () => {
    const s = oai.responses.stream({ model: 'm', input: [{ role: 'developer', content: 'x' }, { role: 'user', content: 'hi' }], reasoning: { effort: 'high', summary: 'auto' } });
    const types = [];
    s.on('event', (e) => types.push(e.type));
    const r = await s.finalResponse();
    assert.equal(r.status, 'completed');
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
    assert.match(r.output_text, /3 files/);
    assert.equal(types[0], 'response.created');
    assert.equal(types.at(-1), 'response.completed');
    assert.ok(types.includes('response.reasoning_summary_text.delta'));
    assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
  });

  test('messages, not streamed', async () => {
    const m = await ant.messages.create({ model: 'claude-haiku-4-5', max_tokens: 4096, system: [{ type: 'text', text: 'Be brief.' }], messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(m.content[0].type, 'text');
    assert.match(m.content[0].text, /3 files/);
    assert.equal(m.stop_reason, 'end_turn');
    assert.equal(m.model, 'claude-haiku-4-5');
    assert.ok(m.usage.input_tokens + m.usage.cache_read_input_tokens > 0);
  });

  test('messages stream helper: thinking, then tool_use, then the result turn', async () => {
    const s = ant.messages.stream({ model: 'm', max_tokens: 1024, thinking: { type: 'enabled', budget_tokens: 1024 }, tools: [anthBash], messages: [{ role: 'user', content: 'List the files' }] });
    const m = await s.finalMessage();
    assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'tool_use']);
    assert.ok(m.content[0].signature.length > 0);
    const tu = m.content[1];
    assert.equal(tu.name, 'Bash');
    assert.deepEqual(tu.input, { command: 'ls -la' });
    assert.equal(m.stop_reason, 'tool_use');
    const m2 = await ant.messages.create({
      model: 'm', max_tokens: 1024, tools: [anthBash],
      messages: [
        { role: 'user', content: 'List the files' },
        { role: 'assistant', content: m.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: tu.id, content: [{ type: 'text', text: 'a b c' }], is_error: false, cache_control: { type: 'ephemeral' } }] },
      ],
    });
    assert.match(m2.content[0].text, /3 files/);
  });

  test('messages stop_sequences end with stop_sequence', async () => {
    const m = await ant.messages.create({ model: 'm', max_tokens: 100, stop_sequences: ['b.py'], messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, 'b.py');
    assert.equal(m.content[0].text, 'There are 3 files in this directory: a.txt, ');
  });

  test('count_tokens', async () => {
    const r = await ant.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'foo' }] });
    assert.equal(r.input_tokens, 25);
  });

  test('errors are the SDKs\' own classes with each API\'s shape', async () => {
    await assert.rejects(oai.chat.completions.create({ model: 'm', messages: 'nope' }),
      (e) => e instanceof OpenAI.BadRequestError && e.error?.type === 'invalid_request_error' && /messages/.test(e.message));
    await assert.rejects(oai.chat.completions.create({ model: 'm', messages: [{ role: 'wizard', content: 'x' }] }),
      (e) => e instanceof OpenAI.BadRequestError && /wizard/.test(e.message));
    await assert.rejects(oai.models.retrieve('gpt-9'), (e) => e instanceof OpenAI.NotFoundError);
    await assert.rejects(ant.messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'robot', content: 'x' }] }),
      (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === 'invalid_request_error' && /robot/.test(e.message));
    await assert.rejects(ant.messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }),
      (e) => e instanceof Anthropic.BadRequestError && /vision/.test(e.message));
    await assert.rejects(oai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], temperature: 9 }),
      (e) => e instanceof OpenAI.BadRequestError && /temperature/.test(e.message));
  });

  test('a failure after the headers reaches the SDK as an error', async () => {
    const s = await oai.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: '[[fail]]' }] });
    await assert.rejects(async () => { for await (const c of s) void c; }, (e) => e instanceof OpenAI.APIError && /engine failed/.test(e.message));
    const as = ant.messages.stream({ model: 'm', max_tokens: 50, messages: [{ role: 'user', content: '[[fail]]' }] });
    await assert.rejects(as.finalMessage(), (e) => e instanceof Anthropic.APIError && /engine failed/.test(e.message));
  });

  test('a client that drops a stream after 3 tokens cancels it; the server keeps serving', async () => {
    const before = await metric(srv.url, 'corvid_client_cancels_total');
    const ac = new AbortController();
    const s = await oai.chat.completions.create(
      { model: 'm', stream: true, messages: [{ role: 'user', content: `[[slow:50]]${say('x'.repeat(400))}` }] },
      { signal: ac.signal },
    );
    let n = 0;
    try {
      for await (const c of s) {
        if (c.choices[0]?.delta?.content) n++;
        if (n === 3) { ac.abort(); break; }
      }
    } catch (e) {
      assert.ok(e instanceof OpenAI.APIUserAbortError, String(e));
    }
    assert.equal(n, 3);
    let after = before;
    for (let i = 0; i < 100 && after === before; i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = await metric(srv.url, 'corvid_client_cancels_total');
    }
    assert.equal(after, before + 1);
    const r = await oai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: say('alive') }] });
    assert.equal(r.choices[0].message.content, 'alive');
  });
});

async function metric(url, name, headers = {}) {
  const t = await (await fetch(`${url}/metrics`, { headers })).text();
  const m = t.match(new RegExp(`^${name} (\\d+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

describe('with an API key', () => {
  let srv;
  before(async () => { srv = await startServer(['--api-key', 'k-123']); });
  after(async () => assert.equal(await srv.stop(), 0));

  test('openai SDK: right key works, wrong key is AuthenticationError', async () => {
    const ok = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'k-123', maxRetries: 0 });
    const r = await ok.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    assert.match(r.choices[0].message.content, /3 files/);
    const bad = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'k-124', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  });

  test('anthropic SDK 1.x sends Bearer, 0.x sends x-api-key: both accepted', async () => {
    for (const [Cls, label] of [[Anthropic, '1.x'], [Anthropic0, '0.x']]) {
      const ok = new Cls({ baseURL: srv.url, apiKey: 'k-123', maxRetries: 0 });
      const m = await ok.messages.create({ model: 'm', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
      assert.match(m.content[0].text, /3 files/, label);
      const bad = new Cls({ baseURL: srv.url, apiKey: 'nope', maxRetries: 0 });
      await assert.rejects(bad.messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
        (e) => e instanceof Cls.AuthenticationError && e.error?.error?.type === 'authentication_error', label);
    }
  });

  test('open routes need no key; metrics does', async () => {
    for (const p of ['/', '/health', '/health/live', '/health/ready', '/livez', '/readyz']) assert.equal((await fetch(srv.url + p)).status, 200, p);
    assert.equal((await fetch(srv.url, { method: 'HEAD' })).status, 200);
    assert.equal((await fetch(`${srv.url}/metrics`)).status, 401);
    assert.ok(await metric(srv.url, 'corvid_queue_depth', { authorization: 'Bearer k-123' }) >= 0);
  });
});

describe('limits', () => {
  let srv;
  before(async () => { srv = await startServer(['--ctx', '300', '--max-body', '20000']); });
  after(async () => assert.equal(await srv.stop(), 0));

  test('a prompt that fills the context is a 400 naming both numbers; max_tokens past it is clamped', async () => {
    const oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    await assert.rejects(oai.chat.completions.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'y'.repeat(400) }] }),
      (e) => e instanceof OpenAI.BadRequestError && /prompt is \d+ tokens and the context is 300 tokens/.test(e.message));
    const r = await oai.chat.completions.create({ model: 'm', max_tokens: 32000, messages: [{ role: 'user', content: 'hi' }] });
    assert.match(r.choices[0].message.content, /3 files/);
  });

  test('a body over the limit is 413 in each API\'s shape', async () => {
    const oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    await assert.rejects(oai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'z'.repeat(30000) }] }),
      (e) => e instanceof OpenAI.APIError && e.status === 413 && e.error?.type === 'invalid_request_error');
    const ant = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
    await assert.rejects(ant.messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'z'.repeat(30000) }] }),
      (e) => e instanceof Anthropic.APIError && e.status === 413 && e.error?.error?.type === 'request_too_large');
  });
});

describe('SIGTERM with streams running', () => {
  test('streams still running when the drain time ends are cut with an error the SDKs raise, and the process exits 0', async () => {
    const srv = await startServer(['--grace-ms', '200']);
    const oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const ant = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
    const long = `[[slow:30]]${say('y'.repeat(300))}`;
    const chat = oai.chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: long }] });
    const msg = ant.messages.stream({ model: 'm', max_tokens: 1000, messages: [{ role: 'user', content: long }] });
    let started = 0;
    await new Promise((resolve) => {
      const go = () => { if (++started === 2) resolve(); };
      chat.once('content', go);
      msg.once('text', go);
    });
    const code = srv.stop();
    // A cut answer is never a finished one: the agent retries instead of
    // acting on half a reply.
    await Promise.all([
      assert.rejects(chat.finalChatCompletion(), (e) => e instanceof OpenAI.APIError && /cut after \d+ tokens/.test(e.message)),
      assert.rejects(msg.finalMessage(), (e) => e instanceof Anthropic.APIError && /cut after \d+ tokens/.test(e.message)),
    ]);
    assert.equal(await code, 0);
  });
});
