// prometheus.test.mjs — the real Prometheus from Debian scrapes a running
// `corvid serve` (stories260K, an API key, --open-metrics) with
// deploy/prometheus/ as shipped (copied beside a targets file naming this
// replica), and its query API returns the KV-usage gauge, equal to used /
// (used + free) blocks of the same scrape, and the vLLM-named alias the
// gateways read. promtool checks the config and lints /metrics: the only
// complaints allowed are the colons of vLLM's own names.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { corvid, importStories260K, repo, startServer } from '../server/helpers.mjs';
import { chat, findProgram, freePort, missing, startProgram, until } from './services.mjs';

const skip = (!existsSync(corvid) && `the release binary ${corvid} is not built`) || missing('prometheus') ||
  missing('promtool');
const shipped = path.join(repo, 'deploy', 'prometheus');

describe('Prometheus scraping corvid', { skip }, () => {
  let dir, srv, prom, api;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'corvid-prometheus-'));
    const gguf = importStories260K(dir);
    srv = await startServer(['serve', gguf, '--port', '0', '--threads', '1', '--kv-memory', '16M', '--api-key', 'k',
      '--open-metrics', '--cache-dir', ''], corvid);
    const r = await chat(srv.url, { authorization: 'Bearer k' }, [{ role: 'user', content: 'Once upon a time' }]);
    assert.equal(r.status, 200);
    const conf = path.join(dir, 'prometheus');
    mkdirSync(path.join(conf, 'targets'), { recursive: true });
    for (const f of ['prometheus.yml', 'corvid.rules.yml']) copyFileSync(path.join(shipped, f), path.join(conf, f));
    writeFileSync(path.join(conf, 'targets', 'corvid.json'), JSON.stringify([{ targets: [`127.0.0.1:${srv.port}`] }]));
    execFileSync(findProgram('promtool'), ['check', 'config', path.join(conf, 'prometheus.yml')]);
    const port = await freePort();
    api = `http://127.0.0.1:${port}/api/v1`;
    prom = startProgram(findProgram('prometheus'), [`--config.file=${path.join(conf, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`]);
  });
  after(async () => {
    await prom?.stop();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const query = async (q) => {
    const r = await (await fetch(`${api}/query?query=${encodeURIComponent(q)}`)).json();
    assert.equal(r.status, 'success', JSON.stringify(r));
    return r.data.result;
  };

  test('promtool finds nothing wrong in /metrics but the colons of vLLM\'s names', async () => {
    const text = await (await fetch(`${srv.url}/metrics`)).text();
    const p = spawnSync(findProgram('promtool'), ['check', 'metrics'], { input: text, encoding: 'utf8' });
    const lines = (p.stdout + p.stderr).split('\n').filter(Boolean);
    // corvid_kv_blocks_total is the scheduler's gauge of the pool's size.
    const other = lines.filter((l) => !/^vllm:\w+ metric names should not contain ':'$/.test(l) &&
      l !== 'corvid_kv_blocks_total non-counter metrics should not have "_total" suffix');
    assert.deepEqual(other, []);
    assert.ok(lines.some((l) => l.startsWith('vllm:kv_cache_usage_perc')), 'promtool read the aliases');
  });

  test('its query API returns the KV-usage gauge, the aliases and up', async () => {
    const [kv] = await until(async () => {
      const r = await query('corvid_kv_usage_ratio');
      return r.length && r;
    }, 60000, `Prometheus to scrape ${srv.url}: ${prom.log()}`);
    assert.equal(kv.metric.instance, `127.0.0.1:${srv.port}`);
    const v = Number(kv.value[1]);
    assert.ok(v > 0 && v < 1, `KV usage ${v}`);
    const [ratio] = await query('corvid_kv_blocks_used / (corvid_kv_blocks_used + corvid_kv_blocks_free)');
    assert.ok(Math.abs(Number(ratio.value[1]) - v) < 1e-6, `${ratio.value[1]} vs ${v}`);
    const [alias] = await query('vllm:kv_cache_usage_perc');
    assert.equal(Number(alias.value[1]), v);
    assert.equal(alias.metric.model_name, 'stories260K');
    const [up] = await query('up{job="corvid"}');
    assert.equal(up.value[1], '1');
    const [tokens] = await query('corvid_generated_tokens_total');
    assert.ok(Number(tokens.value[1]) > 0);
  });
});
