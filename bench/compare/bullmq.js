// The BullMQ side of the comparison: the same workloads as `redial-bench`, printed as JSON.
// Usage: node bullmq.js <redis-port> <jobs> <concurrency> <receiver-base-url> [throughput|rest]
// (the optional last argument runs only the throughput workloads 1-3, or only the others).
// The receiver is `redial-bench --serve-receiver`: /hook, /limited, /outage, /reset, /stats.
'use strict';
const { Queue, Worker, QueueEvents } = require('bullmq');
const http = require('http');

const [port, jobsArg, concArg, base, only] = process.argv.slice(2);
const THROUGHPUT = only !== 'rest';
const REST = only !== 'throughput';
const receiver = `${base}/hook`;
const connection = { host: '127.0.0.1', port: Number(port) };
const JOBS = Number(jobsArg);
const CONC = Number(concArg);
const results = {};
const agent = new http.Agent({ keepAlive: true, maxSockets: CONC });

function post(url) {
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
    req.end('{"n":1}');
  });
}

async function fresh(name) {
  const q = new Queue(name, { connection });
  await q.obliterate({ force: true }).catch(() => {});
  return q;
}

async function fill(q, n, data) {
  for (let i = 0; i < n; i += 1000) {
    const batch = [];
    for (let k = i; k < Math.min(n, i + 1000); k++) batch.push({ name: 'j', data: data(k) });
    await q.addBulk(batch);
  }
}

async function drain(name, n, processor, opts = {}) {
  return new Promise((resolve) => {
    let done = 0;
    const start = process.hrtime.bigint();
    const w = new Worker(name, processor, { connection, concurrency: CONC, ...opts });
    const finish = async () => {
      if (++done === n) {
        const secs = Number(process.hrtime.bigint() - start) / 1e9;
        await w.close();
        resolve(secs);
      }
    };
    w.on('completed', finish);
    w.on('failed', (job) => {
      if (job && job.attemptsMade >= (job.opts.attempts || 1)) finish();
    });
  });
}

function pct(sorted, p) {
  return sorted[Math.round((sorted.length - 1) * p)];
}

async function main() {
  if (THROUGHPUT) await throughput();
  if (REST) await rest();
  console.log(JSON.stringify(results));
  process.exit(0);
}

async function throughput() {
  // 1. Enqueue: addBulk in batches of 1000.
  let q = await fresh('enq');
  let t = process.hrtime.bigint();
  await fill(q, JOBS, (k) => ({ k }));
  results['enqueue, batches of 1000'] = JOBS / (Number(process.hrtime.bigint() - t) / 1e9);
  await q.obliterate({ force: true });
  await q.close();

  // 2. No-op processing at the given concurrency.
  q = await fresh('noop');
  await fill(q, JOBS, (k) => ({ k }));
  let secs = await drain('noop', JOBS, async () => {});
  results[`no-op jobs, concurrency ${CONC}`] = JOBS / secs;
  await q.obliterate({ force: true });
  await q.close();

  // 3. HTTP dispatch to the same receiver.
  const httpJobs = Math.min(JOBS, 50000);
  q = await fresh('http');
  await fill(q, httpJobs, (k) => ({ k }));
  secs = await drain('http', httpJobs, async () => {
    const s = await post(receiver);
    if (s < 200 || s >= 300) throw new Error(`status ${s}`);
  });
  results[`HTTP dispatch, concurrency ${CONC}`] = httpJobs / secs;
  await q.obliterate({ force: true });
  await q.close();
}

async function rest() {
  // 4. Enqueue to first attempt, idle and under load.
  for (const underLoad of [false, true]) {
    const lq = await fresh('lat');
    let loadQ, loadW;
    if (underLoad) {
      loadQ = await fresh('load');
      await fill(loadQ, 50000, (k) => ({ k }));
      loadW = new Worker('load', async () => {}, { connection, concurrency: 100 });
    }
    const starts = new Map();
    const w = new Worker('lat', async (job) => { starts.get(job.data.k)(process.hrtime.bigint()); }, { connection, concurrency: 10 });
    await w.waitUntilReady();
    const samples = [];
    for (let k = 0; k < 500; k++) {
      const seen = new Promise((resolve) => starts.set(k, resolve));
      await lq.add('j', { k });
      const acked = process.hrtime.bigint();
      const at = await seen;
      samples.push(Number(at - acked) / 1e6);
      await new Promise((r) => setTimeout(r, 2));
    }
    samples.sort((a, b) => a - b);
    const label = underLoad ? 'under load' : 'idle';
    results[`enqueue to first attempt p50, ${label}`] = pct(samples, 0.5);
    results[`enqueue to first attempt p99, ${label}`] = pct(samples, 0.99);
    await w.close();
    if (loadW) { await loadW.close(); await loadQ.obliterate({ force: true }); await loadQ.close(); }
    await lq.obliterate({ force: true });
    await lq.close();
  }

  // 6. Retry scenarios, as BullMQ users configure them: 5 attempts, exponential backoff from 1 s.
  for (const [name, url] of [['rate limit 100/s', `${base}/limited`], ['2 s outage', `${base}/outage`]]) {
    const rq = await fresh('retry');
    const n = 1000;
    for (let i = 0; i < n; i += 1000) {
      const batch = [];
      for (let k = i; k < Math.min(n, i + 1000); k++) {
        batch.push({ name: 'j', data: { k }, opts: { attempts: 5, backoff: { type: 'exponential', delay: 1000 } } });
      }
      await rq.addBulk(batch);
    }
    let dead = 0;
    await fetch(`${base}/reset`);
    const t0 = process.hrtime.bigint();
    await new Promise((resolve) => {
      let finished = 0;
      const w = new Worker('retry', async () => {
        const s = await post(url);
        if (s === 429 || s === 503) throw new Error(`status ${s}`);
      }, { connection, concurrency: 32 });
      const end = async () => { if (++finished === n) { await w.close(); resolve(); } };
      w.on('completed', end);
      w.on('failed', (job) => { if (job.attemptsMade >= 5) { dead++; end(); } });
    });
    const counts = await (await fetch(`${base}/stats`)).json();
    results[`${name}: wasted requests (429/503) for ${n} jobs`] = (counts['429'] || 0) + (counts['503'] || 0);
    results[`${name}: dead-lettered`] = dead;
    results[`${name}: drain time`] = Number(process.hrtime.bigint() - t0) / 1e9;
    await rq.obliterate({ force: true });
    await rq.close();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
