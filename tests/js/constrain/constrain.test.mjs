// constrain.test.mjs — constrained decoding end to end on the release
// `corvid serve`: every schema of the corpus (tests/grammar/schemas
// plus the tool schemas the recorded clients sent, read in place) gets 20
// generations at temperature 1.0 from a random-weight model over a real
// vocabulary (testdata's reference tiny-qwen3, GPT-2 tokens) through the
// HTTP API, the server's grammar hook and the scheduler, and every document
// is checked by Ajv — a validator that shares nothing with corvid's schema
// compiler. Requests carry a small max_tokens, so most generations also go
// through the budget rule that makes them end complete. Schemas corvid
// cannot compile must come back as a 400 in each wire's error shape naming
// the construct.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { repo, startServer, testdata } from '../server/helpers.mjs';

const require = createRequire(import.meta.url);
const Ajv = require('ajv').default;
const Ajv2020 = require('ajv/dist/2020').default;
const Ajv04 = require('ajv-draft-04');
const addFormats = require('ajv-formats');

const corvid = process.env.CV_RELEASE_BIN || path.join(repo, 'build', 'corvid');
const model = path.join(testdata, 'reference', 'models', 'tiny-qwen3-gpt2-Q8_0.gguf');
const skip = (!existsSync(corvid) && `the release binary ${corvid} is not built`) ||
  (!existsSync(model) && `${model} is absent`);

const N_DOCS = 20;
const MAX_TOKENS = 128;
const IN_FLIGHT = 8;

function validators() {
  const make = (Cls) => { const a = new Cls({ strict: false, validateFormats: true, unicodeRegExp: true }); addFormats(a); return a; };
  const a07 = make(Ajv), a20 = make(Ajv2020), a04 = make(Ajv04);
  return (schema) => {
    const s = (schema && typeof schema === 'object' && schema.$schema) || '';
    const copy = structuredClone(schema);
    if (copy && typeof copy === 'object') delete copy.$id;
    return (s.includes('draft-04') ? a04 : s.includes('draft-07') || s.includes('draft-06') ? a07 : a20).compile(copy);
  };
}

// The corpus: schema files, then the recorded clients' distinct tool schemas.
function corpus() {
  const out = [];
  const dir = path.join(repo, 'tests', 'grammar', 'schemas');
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.json')).sort())
    out.push({ id: f, schema: JSON.parse(readFileSync(path.join(dir, f), 'utf8')) });
  const seen = new Set();
  const root = path.join(testdata, 'clients');
  for (const client of readdirSync(root, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort()) {
    for (const f of readdirSync(path.join(root, client)).filter((f) => f.endsWith('.json')).sort()) {
      const rec = JSON.parse(readFileSync(path.join(root, client, f), 'utf8'));
      for (const t of rec.body?.tools ?? []) {
        const fn = t.function ?? t;
        const s = t.input_schema ?? fn.parameters;
        if (!s || typeof s !== 'object' || !fn.name) continue;
        const key = JSON.stringify(s);
        if (seen.has(key)) continue;
        seen.add(key);
        out.push({ id: `clients/${client}/${f}:${fn.name}`, schema: s });
      }
    }
  }
  return out;
}

// Runs jobs with at most n in flight.
async function pool(jobs, n) {
  const results = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < jobs.length) { const i = next++; results[i] = await jobs[i](); }
  }));
  return results;
}

const post = async (url, body) => {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
};

describe('constrained decoding on the release server', { skip }, () => {
  let srv;
  before(async () => {
    srv = await startServer(['serve', model, '--port', '0', '--parallel', String(IN_FLIGHT), '--threads', '1', '--ctx', '2048'], corvid);
  });
  after(async () => { if (srv) assert.equal(await srv.stop(), 0, 'graceful stop exits 0'); });

  test('the corpus: 20 generations per schema at temperature 1.0, every one valid for Ajv', async () => {
    const schemas = corpus();
    const nFiles = schemas.filter((s) => !s.id.startsWith('clients/')).length;
    assert.ok(nFiles >= 100, `${nFiles} schema files`);
    assert.ok(schemas.length - nFiles >= 50, `${schemas.length - nFiles} client tool schemas`);
    const compile = validators();
    const jobs = [];
    for (const s of schemas)
      for (let k = 0; k < N_DOCS; k++)
        jobs.push(async () => {
          const r = await post(`${srv.url}/v1/chat/completions`, {
            model: 'm', seed: 1000 + k, temperature: 1.0, max_tokens: MAX_TOKENS,
            messages: [{ role: 'user', content: `Write a document (${k}).` }],
            response_format: { type: 'json_schema', json_schema: { name: 'doc', strict: true, schema: s.schema } },
          });
          return { s, k, r };
        });
    const t0 = performance.now();
    const results = await pool(jobs, IN_FLIGHT);
    const secs = (performance.now() - t0) / 1000;
    const failures = [];
    let tokens = 0, lengthCut = 0;
    const validate = new Map();
    for (const { s, k, r } of results) {
      if (r.status !== 200) { failures.push(`${s.id} #${k}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`); continue; }
      const ch = r.body.choices[0];
      tokens += r.body.usage.completion_tokens;
      if (ch.finish_reason === 'length') lengthCut++;
      let doc;
      try { doc = JSON.parse(ch.message.content); } catch (e) {
        failures.push(`${s.id} #${k}: not JSON (${e.message}): ${JSON.stringify(ch.message.content).slice(0, 300)}`);
        continue;
      }
      if (!validate.has(s.id)) validate.set(s.id, compile(s.schema));
      const v = validate.get(s.id);
      if (!v(doc)) failures.push(`${s.id} #${k}: ${v.errors.map((e) => `${e.instancePath} ${e.message}`).join('; ')}: ${JSON.stringify(ch.message.content).slice(0, 300)}`);
    }
    console.log(`corpus: ${schemas.length} schemas x ${N_DOCS} = ${results.length} generations, ${tokens} tokens in ${secs.toFixed(1)} s, ` +
      `${lengthCut} ended by length, ${failures.length} invalid`);
    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} invalid documents`);
  });

  test('a schema corvid cannot compile is a 400 naming the construct, on every wire', async () => {
    const bad = { type: 'object', properties: { a: { type: 'string', pattern: '(?<=x)y' } }, required: ['a'] };
    const messages = [{ role: 'user', content: 'hi' }];
    const chat = await post(`${srv.url}/v1/chat/completions`, { model: 'm', messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: bad } } });
    assert.equal(chat.status, 400);
    assert.equal(chat.body.error.type, 'invalid_request_error');
    
    assert.match(chat.body.error.message, /#\/properties\/a.*lookbehind/);
    const resp = await post(`${srv.url}/v1/responses`, { model: 'm', input: 'hi', text: { format: { type: 'json_schema', name: 'x', schema: bad } } });
    assert.equal(resp.status, 400);
    assert.match(resp.body.error.message, /#\/properties\/a.*lookbehind/);
    const ant = await post(`${srv.url}/v1/messages`, { model: 'm', max_tokens: 50, messages, output_config: { format: { type: 'json_schema', schema: bad } } });
    assert.equal(ant.status, 400);
    assert.equal(ant.body.type, 'error');
    assert.equal(ant.body.error.type, 'invalid_request_error');
    assert.match(ant.body.error.message, /#\/properties\/a.*lookbehind/);
  });

  test('hostile response_format shapes are 400s, not crashes', async () => {
    const messages = [{ role: 'user', content: 'hi' }];
    for (const rf of [{ type: 'json_schema', json_schema: { name: 'x', schema: 5 } }, { type: 'json_schema', json_schema: { schema: 'str' } },
      { type: 'json_schema', json_schema: { schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } } },
      { type: 'json_schema', json_schema: { schema: { type: 'array', minItems: 5, maxItems: 2 } } },
      { type: 'json_schema', json_schema: { schema: { anyOf: [] } } }, { type: 'xml' }]) {
      const r = await post(`${srv.url}/v1/chat/completions`, { model: 'm', messages, max_tokens: 10, response_format: rf });
      assert.equal(r.status, 400, `${JSON.stringify(rf)}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.type, 'invalid_request_error');
    }
    // the server is still serving
    const ok = await post(`${srv.url}/v1/chat/completions`, { model: 'm', messages, max_tokens: 30, response_format: { type: 'json_object' } });
    assert.equal(ok.status, 200);
  });

  test('corvid run --json-schema prints one valid document; a bad schema is exit 2 naming it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'corvid-run-schema-'));
    try {
      const compile = validators();
      const files = ['address.json', 'tool_bash.json', 'calendar_event.json', 'enum_mixed.json', 'array_of_objects.json', 'integer_2p53.json']
        .map((f) => path.join(repo, 'tests', 'grammar', 'schemas', f)).filter((f) => existsSync(f));
      assert.ok(files.length >= 3, `${files.length} schema files found`);
      for (const f of files)
        for (const seed of [1, 2]) {
          const out = execFileSync(corvid, ['run', model, '-p', 'Hello', '-n', '120', '--temp', '1', '--seed', String(seed), '--threads', '1', '--json-schema', f], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
          const v = compile(JSON.parse(readFileSync(f, 'utf8')));
          assert.ok(v(JSON.parse(out)), `${f} seed ${seed}: ${out}`);
        }
      const bad = path.join(dir, 'bad.json');
      writeFileSync(bad, JSON.stringify({ type: 'string', pattern: 'a(?=b)' }));
      const r = spawnSync(corvid, ['run', model, '-p', 'Hello', '--json-schema', bad], { encoding: 'utf8' });
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /--json-schema .*bad\.json.*lookahead/);
      writeFileSync(bad, '{"type": ');
      const r2 = spawnSync(corvid, ['run', model, '-p', 'Hello', '--json-schema', bad], { encoding: 'utf8' });
      assert.equal(r2.status, 2);
      assert.match(r2.stderr, /line 1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('Responses text.format and Anthropic output_config.format give documents valid for their schema', async () => {
    const schema = { type: 'object', properties: { title: { type: 'string', maxLength: 40 } }, required: ['title'], additionalProperties: false };
    const v = validators()(schema);
    for (let k = 0; k < 5; k++) {
      const r = await post(`${srv.url}/v1/responses`, { model: 'm', input: 'hi', temperature: 1, max_output_tokens: 60, text: { format: { type: 'json_schema', name: 't', strict: true, schema } } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const text = r.body.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join('');
      assert.ok(v(JSON.parse(text)), `responses: ${text}`);
      // Claude Code's title request: output_config.format
      const a = await post(`${srv.url}/v1/messages`, { model: 'claude-haiku', max_tokens: 60, temperature: 1, messages: [{ role: 'user', content: 'hi' }], output_config: { format: { type: 'json_schema', schema } } });
      assert.equal(a.status, 200, JSON.stringify(a.body));
      const at = a.body.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
      assert.ok(v(JSON.parse(at)), `anthropic: ${at}`);
      const o = await post(`${srv.url}/v1/chat/completions`, { model: 'm', temperature: 1, max_tokens: 60, messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_object' } });
      const doc = JSON.parse(o.body.choices[0].message.content);
      assert.ok(doc && typeof doc === 'object' && !Array.isArray(doc), o.body.choices[0].message.content);
    }
  });
});
