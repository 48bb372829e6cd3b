// model.test.mjs — the release `corvid serve` with a real model: Karpathy's
// stories260K (testdata/models), imported to GGUF by `corvid import llama2c`
// at the start. The official SDKs check what only a real model shows:
// greedy tokens exactly as the llama2.c reference prints them, streamed and
// assembled answers identical on every wire, token counts that agree
// between count_tokens and the messages usage, and a dropped stream
// cancelled in the scheduler.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { corvid, importStories260K, startServer, testdata } from './helpers.mjs';

const skip = !existsSync(corvid) && `the release binary ${corvid} is not built`;

describe('corvid serve with stories260K', { skip }, () => {
  let srv, dir, oai, ant;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'corvid-model-'));
    const gguf = importStories260K(dir);
    srv = await startServer(['serve', gguf, '--port', '0', '--parallel', '2', '--threads', '1'], corvid);
    oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    ant = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
  });
  after(async () => {
    if (srv) assert.equal(await srv.stop(), 0, 'graceful stop exits 0');
    rmSync(dir, { recursive: true, force: true });
  });

  test('greedy completion from BOS is the llama2.c reference text, byte for byte', async () => {
    const want = readFileSync(path.join(testdata, 'models', 'stories260K.greedy_t0.expected.txt'), 'utf8');
    const r = await oai.completions.create({ model: 'stories260K', prompt: [1], max_tokens: 256, temperature: 0 });
    assert.equal(r.usage.completion_tokens, 256);
    assert.equal(r.choices[0].text, want.replace(/\n$/, ''));
    let s = '';
    for await (const c of await oai.completions.create({ model: 'm', prompt: [1], max_tokens: 256, temperature: 0, stream: true })) s += c.choices[0]?.text ?? '';
    assert.equal(s, r.choices[0].text);
  });

  test('chat: streamed and assembled answers are identical at temperature 0', async () => {
    const body = { model: 'm', temperature: 0, max_tokens: 60, messages: [{ role: 'system', content: 'Tell a story.' }, { role: 'user', content: 'Once upon a time' }] };
    const a = await oai.chat.completions.create(body);
    const b = await oai.chat.completions.stream(body).finalChatCompletion();
    assert.ok(a.choices[0].message.content.length > 20);
    assert.equal(b.choices[0].message.content, a.choices[0].message.content);
    assert.equal(a.usage.completion_tokens, 60);
    assert.equal(a.choices[0].finish_reason, 'length');
  });

  test('responses: streamed and assembled answers are identical', async () => {
    const body = { model: 'm', temperature: 0, max_output_tokens: 40, input: 'The cat' };
    const a = await oai.responses.create(body);
    const b = await oai.responses.stream(body).finalResponse();
    assert.ok(a.output_text.length > 10);
    assert.equal(b.output_text, a.output_text);
    assert.equal(a.status, 'incomplete');
  });

  test('messages: streamed and assembled answers are identical; count_tokens agrees with usage', async () => {
    const body = { model: 'claude-sonnet-4-5', temperature: 0, max_tokens: 40, system: 'Tell a story.', messages: [{ role: 'user', content: 'A dog' }] };
    const a = await ant.messages.create(body);
    const b = await ant.messages.stream(body).finalMessage();
    assert.equal(b.content[0].text, a.content[0].text);
    assert.equal(a.stop_reason, 'max_tokens');
    const n = await ant.messages.countTokens({ model: 'm', system: body.system, messages: body.messages });
    assert.equal(n.input_tokens, a.usage.input_tokens + a.usage.cache_read_input_tokens);
  });

  test('a prompt longer than the context is a 400 naming both numbers', async () => {
    await assert.rejects(oai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'word '.repeat(600) }] }),
      (e) => e instanceof OpenAI.BadRequestError && /context is 512 tokens/.test(e.message));
  });

  test('a stream dropped after 3 tokens is cancelled; the server keeps serving', async () => {
    const metric = async () => Number((await (await fetch(`${srv.url}/metrics`)).text()).match(/^corvid_client_cancels_total (\d+)$/m)[1]);
    const before = await metric();
    const ac = new AbortController();
    const s = await oai.chat.completions.create({ model: 'm', stream: true, max_tokens: 400, messages: [{ role: 'user', content: 'Tell me a long story' }] }, { signal: ac.signal });
    let n = 0;
    try {
      for await (const c of s) {
        if (c.choices[0]?.delta?.content) n++;
        if (n === 3) { ac.abort(); break; }
      }
    } catch (e) { assert.ok(e instanceof OpenAI.APIUserAbortError); }
    let after = before;
    for (let i = 0; i < 100 && after === before; i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = await metric();
    }
    assert.equal(after, before + 1);
    const r = await oai.completions.create({ model: 'm', prompt: [1], max_tokens: 5, temperature: 0 });
    assert.equal(r.choices[0].text, 'Once upon a time,');
  });
});
