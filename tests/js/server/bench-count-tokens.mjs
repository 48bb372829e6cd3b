// bench-count-tokens.mjs — Claude Code's /context burst against a running
// server: the 14 recorded count_tokens requests of
// testdata/clients/claude-code-context sent in parallel, ROUNDS times, then
// once each in sequence. Prints wall-clock latency (median, p90, max) and,
// given the server's pid, the CPU time the server spent (from /proc), which
// stays meaningful when the machine is shared and wall time is not.
//   node tests/js/server/bench-count-tokens.mjs http://127.0.0.1:8000 [PID] [ROUNDS]
// Not part of `make test` (it measures; it asserts nothing).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { testdata } from './helpers.mjs';

const [url, pid, roundsArg] = process.argv.slice(2);
const rounds = Number(roundsArg || 5);
const dir = path.join(testdata, 'clients', 'claude-code-context');
const recs = readdirSync(dir).filter((f) => f.includes('count_tokens')).sort()
  .map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')));
const cpu = () => {
  if (!pid) return 0;
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, in ms at 100 ticks/s
};
const one = async (rec) => {
  const t0 = performance.now();
  const r = await fetch(`${url}${rec.path}${rec.query ? `?${rec.query}` : ''}`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: JSON.stringify(rec.body),
  });
  const v = await r.json();
  if (r.status !== 200) throw new Error(`${r.status} ${JSON.stringify(v)}`);
  return { ms: performance.now() - t0, tokens: v.input_tokens };
};
const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(1);
  return `median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms`;
};
const c0 = cpu();
const burst = [];
let tokens = [];
for (let i = 0; i < rounds; i++) {
  const res = await Promise.all(recs.map(one));
  burst.push(...res.map((r) => r.ms));
  tokens = res.map((r) => r.tokens);
}
const c1 = cpu();
const seq = [];
for (const rec of recs) seq.push((await one(rec)).ms);
console.log(`${recs.length} requests (input_tokens ${tokens.join(', ')})`);
console.log(`burst, ${recs.length} in parallel x ${rounds}: ${stats(burst)}`);
console.log(`one at a time: ${stats(seq)}`);
if (pid) console.log(`server CPU for the bursts: ${c1 - c0} ms for ${burst.length} requests (${((c1 - c0) / burst.length).toFixed(2)} ms each)`);
