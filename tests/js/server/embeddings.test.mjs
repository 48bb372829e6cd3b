// embeddings.test.mjs — the official `openai` SDK's embeddings.create against
// the release `corvid serve` holding a chat model and an embedding model (a
// tiny synth qwen3 written with qwen3.pooling_type = last, as llama.cpp's
// converter writes Qwen3-Embedding). The SDK asks for base64 by default and
// decodes it itself: its vectors must equal the float encoding's, have unit
// length, come back in input order for a batch and equal each input alone;
// token-id inputs work, and the SDK sees the wire's own errors (an unknown
// model is a NotFoundError, a chat model a BadRequestError).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { corvid, startServer, testdata } from './helpers.mjs';

const skip = !existsSync(corvid) && `the release binary ${corvid} is not built`;

function synth(dir, name, arch, pooling) {
  const out = path.join(dir, `${name}.gguf`);
  execFileSync(corvid, ['synth', '--arch', arch, '--shape', 'tiny', '--dtype', 'q8_0', '--vocab',
    path.join(testdata, 'vocab', 'ggml-vocab-gpt-2.gguf'), '--seed', '3', '--pooling', String(pooling), '-o', out]);
  return out;
}

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

describe('openai embeddings.create against corvid serve', { skip }, () => {
  let srv, dir, oai;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'corvid-embed-'));
    const chat = synth(dir, 'chat', 'qwen2', 0);
    const emb = synth(dir, 'embed', 'qwen3', 3);
    srv = await startServer(['serve', chat, emb, '--port', '0', '--parallel', '2', '--threads', '1',
      '--kv-memory', '16M', '--cache-dir', ''], corvid);
    oai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  });
  after(async () => {
    if (srv) assert.equal(await srv.stop(), 0, 'graceful stop exits 0');
    rmSync(dir, { recursive: true, force: true });
  });

  test('a batch: unit vectors in input order, base64 (the SDK default) equal to float, equal to each alone', async () => {
    const input = ['the fox crossed the river', 'clouds over the hills', 'weather'];
    const b64 = await oai.embeddings.create({ model: 'embed', input });
    const flt = await oai.embeddings.create({ model: 'embed', input, encoding_format: 'float' });
    assert.equal(b64.object, 'list');
    assert.equal(b64.model, 'embed');
    assert.equal(b64.data.length, 3);
    assert.ok(b64.usage.prompt_tokens >= 3 && b64.usage.total_tokens === b64.usage.prompt_tokens);
    for (let i = 0; i < 3; i++) {
      assert.equal(b64.data[i].index, i);
      assert.equal(b64.data[i].embedding.length, 256);
      assert.ok(Math.abs(norm(b64.data[i].embedding) - 1) < 1e-5);
      // the floats print with 9 significant digits: they read back as the same float32
      assert.deepEqual(Float32Array.from(flt.data[i].embedding), Float32Array.from(b64.data[i].embedding));
      const one = await oai.embeddings.create({ model: 'embed', input: input[i], encoding_format: 'float' });
      assert.deepEqual(one.data[0].embedding, flt.data[i].embedding, `input ${i} alone`);
    }
    assert.notDeepEqual(flt.data[0].embedding, flt.data[1].embedding);
  });

  test('token ids: one array and arrays of arrays', async () => {
    const text = await oai.embeddings.create({ model: 'embed', input: 'Hello world', encoding_format: 'float' });
    const ids = await oai.embeddings.create({ model: 'embed', input: [15496, 995], encoding_format: 'float' });
    const many = await oai.embeddings.create({ model: 'embed', input: [[15496, 995], [995]], encoding_format: 'float' });
    assert.deepEqual(ids.data[0].embedding, text.data[0].embedding);
    assert.deepEqual(many.data[0].embedding, text.data[0].embedding);
    assert.equal(many.data.length, 2);
    assert.equal(many.usage.prompt_tokens, 3);
  });

  test('errors in the wire\'s own shape', async () => {
    await assert.rejects(oai.embeddings.create({ model: 'text-embedding-3-small', input: 'x' }),
      (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found' && /'embed'/.test(e.message));
    await assert.rejects(oai.embeddings.create({ model: 'chat', input: 'x' }),
      (e) => e instanceof OpenAI.BadRequestError && /not an embedding model/.test(e.message));
    await assert.rejects(oai.embeddings.create({ model: 'embed', input: 'x', dimensions: 32 }),
      (e) => e instanceof OpenAI.BadRequestError && /dimensions/.test(e.message));
  });

  test('the chat model beside it still chats', async () => {
    const r = await oai.chat.completions.create({ model: 'chat', max_tokens: 4, temperature: 0,
      messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.choices.length, 1);
    assert.equal(r.usage.completion_tokens > 0, true);
  });
});
