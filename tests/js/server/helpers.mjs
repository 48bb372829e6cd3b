// helpers.mjs — start and stop a real server process for the end-to-end
// tests: tests/server/fake_serve (cv_server + the test-only byte-level
// backend, the same cv_server_run loop as `corvid serve`). CTest passes its
// path in CV_FAKE_SERVE; without it the tests look in build-asan/ then build/.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, '..', '..', '..');
export const testdata = process.env.CV_TESTDATA_DIR || path.resolve(repo, '..', 'shared', 'testdata');
// The release `corvid` (CTest passes it in CV_RELEASE_BIN; make test builds it).
export const corvid = process.env.CV_RELEASE_BIN || path.join(repo, 'build', 'corvid');

// Karpathy's stories260K (testdata/models) imported to DIR/stories260K.gguf
// by `corvid import llama2c`; returns the path.
export function importStories260K(dir) {
  const gguf = path.join(dir, 'stories260K.gguf');
  const m = path.join(testdata, 'models');
  execFileSync(corvid, ['import', 'llama2c', path.join(m, 'stories260K.bin'), path.join(m, 'tok512.bin'), '-o', gguf]);
  return gguf;
}

function serverBinary() {
  if (process.env.CV_FAKE_SERVE) return process.env.CV_FAKE_SERVE;
  for (const b of ['build-asan', 'build']) {
    const p = path.join(repo, b, 'tests', 'server', 'fake_serve');
    if (existsSync(p)) return p;
  }
  throw new Error('fake_serve not built: cmake --build build --target fake_serve');
}

// Starts a server and waits for its "listening on http://HOST:PORT" line on
// stdout; resolves to { port, url, pid, stop() }. stop() sends SIGTERM
// and resolves to the exit code (a drain exits 0).
// bin defaults to fake_serve; model tests pass the release corvid. env adds
// to the environment.
export function startServer(args = [], bin = serverBinary(), env = {}) {
  return new Promise((resolve, reject) => {
    // `corvid serve` saves its prefix cache under XDG_CACHE_HOME: a private
    // one per server, removed when the process is gone, never the user's.
    const cacheHome = mkdtempSync(path.join(tmpdir(), 'corvid-test-cache-'));
    const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, XDG_CACHE_HOME: cacheHome, ...env } });
    proc.once('close', () => rmSync(cacheHome, { recursive: true, force: true }));
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 30000);
    proc.stderr.on('data', (d) => { err += d; if (err.length > 100000) err = err.slice(-50000); });
    proc.on('exit', (code) => reject(new Error(`server exited ${code} before listening: ${err}`)));
    let done = false;
    const onData = (d) => {
      out += d;
      if (done) return;
      const m = out.match(/listening on http:\/\/\S+:(\d+)/);
      if (!m) return;
      done = true;
      clearTimeout(timer);
      proc.removeAllListeners('exit');
      const port = Number(m[1]);
      const exited = new Promise((r) => proc.on('exit', (code, signal) => r(code ?? signal)));
      resolve({
        port,
        url: `http://127.0.0.1:${port}`,
        pid: proc.pid,
        stderr: () => err,
        stop: async () => { proc.kill('SIGTERM'); return exited; },
      });
    };
    proc.stdout.on('data', onData);
  });
}

// Base64 form of a reply the fake backend substitutes for the sampler's text.
export const say = (text) => `[[say64:${Buffer.from(text, 'utf8').toString('base64')}]]`;
