// k8s.test.mjs — deploy/k8s/*.yaml checked offline (no cluster is reachable
// here: nothing is applied):
//   - schemas: the core kinds and HTTPRoute by npm's kubernetes-models and
//     @kubernetes-models/gateway-api (types, enums, required fields), and by
//     TypeScript against their declarations for unknown (misspelt) fields;
//     InferencePool and InferenceObjective by Ajv against the extension's CRD
//     schemas (crd-schemas.mjs). A misspelt copy of each must fail, so the
//     checks can fail;
//   - references: every selector matches the pods, ports and names agree,
//     the HTTPRoute and the objective name the pool;
//   - the pod as corvid sees it: the container's args run the release
//     `corvid serve` (stories260K in place of the model, loopback, a free
//     port) with an API key, and the probes' paths answer 200 without it, as
//     does /metrics (--open-metrics) while /v1/models wants it;
//   - sizing: the CPU request is --threads, the memory request holds the
//     model's file (its size in `corvid ls --aliases`) and --kv-memory, the
//     grace period holds preStop and the drain.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';
import { Service } from 'kubernetes-models/v1/Service';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute';
import { corvid, importStories260K, repo, startServer } from '../server/helpers.mjs';
import { inferenceObjectiveV1alpha2, inferencePoolV1 } from './crd-schemas.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const k8s = path.join(repo, 'deploy', 'k8s');

// kind → its model class and TypeScript declaration, or its JSON Schema.
const kinds = {
  'v1/Service': { cls: Service, decl: ['kubernetes-models/v1/Service', 'IService'] },
  'apps/v1/StatefulSet': { cls: StatefulSet, decl: ['kubernetes-models/apps/v1/StatefulSet', 'IStatefulSet'] },
  'policy/v1/PodDisruptionBudget': { cls: PodDisruptionBudget,
    decl: ['kubernetes-models/policy/v1/PodDisruptionBudget', 'IPodDisruptionBudget'] },
  'gateway.networking.k8s.io/v1/HTTPRoute': { cls: HTTPRoute,
    decl: ['@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute', 'IHTTPRoute'] },
  'inference.networking.k8s.io/v1/InferencePool': { schema: inferencePoolV1 },
  'inference.networking.x-k8s.io/v1alpha2/InferenceObjective': { schema: inferenceObjectiveV1alpha2 },
};
const ajv = new Ajv({ allErrors: true });

// Every document of every file, parsed strictly.
function load() {
  const docs = [];
  for (const f of readdirSync(k8s).filter((n) => n.endsWith('.yaml')).sort()) {
    for (const d of parseAllDocuments(readFileSync(path.join(k8s, f), 'utf8'), { uniqueKeys: true })) {
      assert.deepEqual(d.errors, [], `${f}: YAML errors`);
      docs.push({ file: f, obj: d.toJS() });
    }
  }
  return docs;
}
const key = (o) => `${o.apiVersion}/${o.kind}`;

// The schema errors of one object (empty when valid).
function schemaErrors(o) {
  const k = kinds[key(o)];
  if (!k) return [`no schema for ${key(o)}`];
  if (k.schema) return ajv.validate(k.schema, o) ? [] : ajv.errors.map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
  try {
    new k.cls(o).validate();
    return [];
  } catch (e) {
    return [e.message];
  }
}

// TypeScript's complaints about objects typed by their declarations: an
// object literal may only name known properties. The source is virtual, as
// if it sat in this folder (so node_modules resolves).
function typeErrors(objs) {
  const file = path.join(here, '__manifests__.ts');
  let src = '';
  objs.forEach((o, i) => {
    const [mod, iface] = kinds[key(o)].decl;
    src += `import type { ${iface} as T${i} } from '${mod}';\nexport const d${i}: T${i} = ${JSON.stringify(o, null, 1)};\n`;
  });
  const options = { strict: true, noEmit: true, skipLibCheck: true, types: [], target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Node10 };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (f, lang, ...rest) => (f === file ? ts.createSourceFile(f, src, lang) : getSourceFile.call(host, f, lang, ...rest));
  host.fileExists = (f) => f === file || fileExists.call(host, f);
  host.readFile = (f) => (f === file ? src : readFile.call(host, f));
  const prog = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(prog).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
}

const docs = load();
const find = (kind, name) => docs.map((d) => d.obj).find((o) => o.kind === kind && (!name || o.metadata.name === name));
const sts = find('StatefulSet');
const pod = sts.spec.template;
const container = pod.spec.containers.find((c) => c.name === 'corvid');
const args = container.args;
const arg = (flag) => args[args.indexOf(flag) + 1];
const env = Object.fromEntries(container.env.filter((e) => 'value' in e).map((e) => [e.name, e.value]));
const gib = (q) => { // a Kubernetes quantity or a corvid size, in GiB
  const m = String(q).match(/^([\d.]+)\s*(Gi|G|Mi|M)?$/);
  const f = { Gi: 1, G: 1, Mi: 1 / 1024, M: 1 / 1024 }[m[2]] ?? 1 / 2 ** 30;
  return Number(m[1]) * f;
};

describe('deploy/k8s manifests', () => {
  test('every document passes its kind\'s schema', () => {
    assert.ok(docs.length >= 6, `${docs.length} documents`);
    for (const d of docs) assert.deepEqual(schemaErrors(d.obj), [], `${d.file}: ${key(d.obj)} ${d.obj.metadata?.name}`);
  });

  test('no document names a field its kind does not have', () => {
    const typed = docs.map((d) => d.obj).filter((o) => kinds[key(o)]?.decl);
    assert.deepEqual(typeErrors(typed), []);
  });

  test('the checks catch a misspelt field and a wrong type', () => {
    const bad = structuredClone(sts);
    bad.spec.template.spec.containers[0].readinesProbe = bad.spec.template.spec.containers[0].readinessProbe;
    assert.match(typeErrors([bad]).join('\n'), /readinesProbe/);
    const badPort = structuredClone(sts);
    badPort.spec.template.spec.containers[0].ports[0].containerPort = 'eighty';
    assert.notDeepEqual(schemaErrors(badPort), []);
    const pool = structuredClone(find('InferencePool'));
    pool.spec.targetPort = pool.spec.targetPorts;
    delete pool.spec.targetPorts;
    assert.notDeepEqual(schemaErrors(pool), []);
    const obj = structuredClone(find('InferenceObjective'));
    obj.spec.poolRef.nmae = 'corvid';
    assert.notDeepEqual(schemaErrors(obj), []);
  });

  test('selectors match the pods, ports and names agree', () => {
    const labels = pod.metadata.labels;
    const matches = (sel) => Object.entries(sel).every(([k, v]) => labels[k] === v);
    assert.ok(matches(sts.spec.selector.matchLabels));
    assert.ok(matches(find('Service').spec.selector));
    assert.ok(matches(find('PodDisruptionBudget').spec.selector.matchLabels));
    const pool = find('InferencePool');
    assert.ok(matches(pool.spec.selector.matchLabels));
    const http = container.ports.find((p) => p.name === 'http');
    assert.equal(pool.spec.targetPorts[0].number, http.containerPort);
    assert.equal(Number(arg('--port')), http.containerPort);
    assert.equal(find('Service').spec.ports[0].targetPort, 'http');
    assert.equal(sts.spec.serviceName, find('Service').metadata.name);
    assert.equal(find('InferenceObjective').spec.poolRef.name, pool.metadata.name);
    const ref = find('HTTPRoute').spec.rules[0].backendRefs[0];
    assert.deepEqual([ref.group, ref.kind, ref.name], ['inference.networking.k8s.io', 'InferencePool', pool.metadata.name]);
    const mounts = container.volumeMounts.map((m) => m.name);
    assert.ok(sts.spec.volumeClaimTemplates.every((v) => mounts.includes(v.metadata.name)));
    assert.ok(arg('--cache-dir').startsWith(container.volumeMounts[0].mountPath), 'the cache file is on the volume');
    assert.ok(env.CORVID_MODELS.startsWith(container.volumeMounts[0].mountPath), 'the model store is on the volume');
    const pull = pod.spec.initContainers[0];
    assert.deepEqual(pull.env, container.env.filter((e) => e.name !== 'CORVID_API_KEY'), 'the init container pulls what is served');
  });

  test('requests hold the model, the KV memory and the threads; the grace holds the drain', () => {
    const aliases = execFileSync(corvid, ['ls', '--aliases'], { encoding: 'utf8' });
    const line = aliases.split('\n').findIndex((l) => l.startsWith(`${env.CORVID_MODEL} `));
    assert.ok(line >= 0, `${env.CORVID_MODEL} is an alias`);
    const gb = Number(aliases.split('\n')[line + 1].match(/([\d.]+) GB/)[1]);
    const need = (gb * 1e9) / 2 ** 30 + gib(arg('--kv-memory'));
    const req = container.resources.requests;
    assert.ok(gib(req.memory) >= need, `memory request ${req.memory} < ${need.toFixed(1)} GiB`);
    assert.equal(container.resources.limits.memory, req.memory);
    assert.equal(Number(req.cpu), Number(arg('--threads')));
    const sleep = Number(container.lifecycle.preStop.exec.command[1]);
    assert.ok(pod.spec.terminationGracePeriodSeconds >= sleep + Number(arg('--drain-timeout')) + 10);
  });

  describe('the container\'s command line on the release corvid', { skip: !existsSync(corvid) && `${corvid} is not built` }, () => {
    let dir, srv;
    before(async () => {
      dir = mkdtempSync(path.join(tmpdir(), 'corvid-k8s-'));
      const gguf = importStories260K(dir);
      assert.equal(container.command[0], 'corvid');
      const local = args.map((a, i) => (a === '$(CORVID_MODEL)' ? gguf : args[i - 1] === '--host' ? '127.0.0.1'
        : args[i - 1] === '--port' ? '0' : args[i - 1] === '--cache-dir' ? path.join(dir, 'cache') : a));
      srv = await startServer(local, corvid, { CORVID_API_KEY: 'k' });
    });
    after(async () => {
      if (srv) assert.equal(await srv.stop(), 0);
      rmSync(dir, { recursive: true, force: true });
    });
    test('its probes and /metrics answer without the key, the API wants it', async () => {
      for (const p of [container.readinessProbe, container.livenessProbe, container.startupProbe]) {
        assert.equal(p.httpGet.port, 'http');
        assert.equal((await fetch(srv.url + p.httpGet.path)).status, 200, p.httpGet.path);
      }
      assert.equal((await fetch(`${srv.url}/metrics`)).status, 200);
      assert.equal((await fetch(`${srv.url}/v1/models`)).status, 401);
      assert.equal((await fetch(`${srv.url}/v1/models`, { headers: { authorization: 'Bearer k' } })).status, 200);
    });
  });
});
