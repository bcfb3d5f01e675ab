// Redial's PostgreSQL peers in the comparison: graphile-worker and pg-boss on the PostgreSQL server
// Redial's PostgreSQL runs use, with the throughput workloads of `redial-bench --only
// enqueue,noop,http` and of bullmq.js's `throughput`, printed as JSON (the keys bullmq.js prints,
// so that run.sh's tables read both).
// Usage: node pgpeers.js <database-url> <jobs> <concurrency> <receiver-base-url> <peer> [workloads]
//   peer: graphile-batched | graphile-defaults | pgboss
//   workloads: a comma-separated subset of enqueue,noop,http (all three by default)
// Each workload runs in a fresh database, created on that server and dropped afterwards. The
// receiver is `redial-bench --serve-receiver` (only /hook is used).
//
// The peers, as configured here:
// - graphile-batched: graphile-worker as its performance guide configures it
//   (worker.graphile.org/docs/performance: localQueue { size: 500 }, completeJobBatchDelay 0,
//   failJobBatchDelay 0, maxPoolSize one above concurrentJobs), concurrentJobs <concurrency>.
// - graphile-defaults: graphile-worker with concurrentJobs <concurrency> and nothing else changed
//   (so a pool of 10 connections, and each worker fetches and completes its own jobs).
// - pgboss: pg-boss, 4 workers fetching 250 jobs each, polling every 0.5 s, the least it accepts
//   (`pollingIntervalSeconds must be at least every 500ms`). A worker fetches again only after a
//   polling interval has passed since its previous fetch, so 4 x 250 jobs per 0.5 s, 2,000 jobs/s,
//   bounds its drain. A batch's jobs run at once; at most <concurrency> HTTP requests are open at a
//   time (one keep-alive agent for all of them, as in bullmq.js).
// Both peers log only warnings and errors here (graphile-worker otherwise prints a line per job).
//
// A drain ends when every job's handler has returned and the peer's own table holds no job left
// to finish: both peers record a completion after the handler returns, without the handler
// waiting for it, so that counting handler calls alone would stop the clock early. Redial's
// drain ends the same way (every attempt's result written).
//
// PostgreSQL server CPU per job: the CPU time of the server's processes (the postmaster, found as
// the parent of this script's own backend, and its children: backends, WAL writer, checkpointer,
// autovacuum), read from /proc/<pid>/stat just before and just after each timed workload. Each
// process counts its own utime + stime and its reaped children's cutime + cstime, so a backend that
// exits in between still counts: the postmaster reaps it and its time moves into the postmaster's
// cutime/cstime. The counters are in clock ticks (10 ms each, for each process), so runs of many
// seconds read true and short ones only roughly. Omitted when the server runs on another machine.
'use strict';
// graphile-worker reads this once, when it loads: without it, it logs every job's completion.
process.env.NO_LOG_SUCCESS = '1';
const { Logger, makeWorkerUtils, run, runMigrations } = require('graphile-worker');
const PgBoss = require('pg-boss');
const pg = require('pg');
const fs = require('fs');
const http = require('http');
const { execFileSync } = require('child_process');

const [serverUrl, jobsArg, concArg, base, peerName, workloadsArg] = process.argv.slice(2);
const JOBS = Number(jobsArg);
const CONC = Number(concArg);
const WORKLOADS = (workloadsArg || 'enqueue,noop,http').split(',');
const HTTP_JOBS = Math.min(JOBS, 50000); // as bullmq.js
const receiver = `${base}/hook`;
const agent = new http.Agent({ keepAlive: true, maxSockets: CONC });

// Warnings and errors on stderr; stdout carries only the JSON.
const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') console.error(`graphile-worker ${level}: ${message}`);
});

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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const seconds = (since) => Number(process.hrtime.bigint() - since) / 1e9;

// A peer opens a database it has to itself and answers with: `add(batch of payloads)`;
// `work(handler)`, which starts its workers over the jobs and resolves to a stop function;
// `unfinished`, a query counting the jobs not yet recorded as done; and `close()`.
function graphileWorker(settings) {
  return {
    settings,
    async open(url) {
      await runMigrations({ connectionString: url, logger });
      const utils = await makeWorkerUtils({ connectionString: url, logger });
      return {
        add: (payloads) => utils.addJobs(payloads.map((payload) => ({ identifier: 'j', payload }))),
        async work(handler) {
          const runner = await run({
            noHandleSignals: true,
            logger,
            taskList: { j: (payload) => handler(payload) },
            preset: { worker: { connectionString: url, concurrentJobs: CONC, ...settings } },
          });
          return () => runner.stop();
        },
        // Completed jobs are deleted; a job not yet completed is still a row.
        unfinished: 'select count(*)::int as n from graphile_worker._private_jobs',
        close: () => utils.release(),
      };
    },
  };
}

const PGBOSS = { workers: 4, batchSize: 250, pollingIntervalSeconds: 0.5 };

function pgBoss() {
  return {
    settings: PGBOSS,
    async open(url) {
      const boss = new PgBoss({ connectionString: url });
      boss.on('error', (e) => console.error(`pg-boss error: ${e.message}`));
      await boss.start();
      await boss.createQueue('j');
      return {
        add: (payloads) => boss.insert(payloads.map((data) => ({ name: 'j', data }))),
        async work(handler) {
          const { workers, ...options } = PGBOSS;
          for (let i = 0; i < workers; i++) {
            await boss.work('j', options, (jobs) => Promise.all(jobs.map((job) => handler(job.data))));
          }
          return () => boss.offWork('j');
        },
        unfinished: "select count(*)::int as n from pgboss.job where name = 'j' and state < 'completed'",
        close: () => boss.stop({ graceful: true, wait: true }),
      };
    },
  };
}

const PEERS = {
  'graphile-batched': graphileWorker({
    localQueue: { size: 500 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
    maxPoolSize: CONC + 1,
  }),
  'graphile-defaults': graphileWorker({}),
  pgboss: pgBoss(),
};

// The server's CPU clock ticks so far (see the top of this file), or null without /proc access.
function serverTicks(postmaster) {
  if (!postmaster) return null;
  let sum = 0;
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited since the listing
    }
    // pid (comm) state ppid ... utime stime cutime cstime: fields 14 to 17.
    const f = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    if (Number(pid) === postmaster || Number(f[1]) === postmaster) {
      sum += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    }
  }
  return sum;
}

function tickMicros() {
  try {
    return 1e6 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());
  } catch {
    return 1e6 / 100;
  }
}

// The postmaster's pid: the parent of a backend of ours, when the server runs on this machine.
async function findPostmaster(client) {
  const { rows } = await client.query('select pg_backend_pid() as pid');
  try {
    const stat = fs.readFileSync(`/proc/${rows[0].pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

// Runs `fn(url)` on a fresh database named after the workload, dropped afterwards.
async function inFreshDatabase(admin, workload, fn) {
  const name = `bench_${peerName.replace(/-/g, '_')}_${workload}`;
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.query(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  try {
    return await fn(url.toString());
  } finally {
    // The peers end their pools' connections without waiting for them; dropping the database
    // under a connection still open makes its pool throw.
    for (let i = 0; i < 500; i++) {
      const { rows } = await admin.query('select count(*)::int as n from pg_stat_activity where datname = $1', [name]);
      if (rows[0].n === 0) break;
      await sleep(20);
    }
    await admin.query(`drop database ${name} with (force)`);
  }
}

async function fill(queue, n) {
  for (let i = 0; i < n; i += 1000) {
    const batch = [];
    for (let k = i; k < Math.min(n, i + 1000); k++) batch.push({ k });
    await queue.add(batch);
  }
}

// Measures `during()` on the wall clock and on the server's and this process's CPU; the CPU
// figures are per job, in microseconds.
async function measured(postmaster, jobs, during) {
  const ticks = serverTicks(postmaster);
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  await during();
  const secs = seconds(start);
  const used = process.cpuUsage(cpu);
  const ticksAfter = serverTicks(postmaster);
  return {
    rate: jobs / secs,
    serverUs: ticks === null ? null : ((ticksAfter - ticks) * tickMicros()) / jobs,
    clientUs: (used.user + used.system) / jobs,
  };
}

// Drains a backlog of `n` jobs, each running `job`; returns what `measured` returns.
async function drain(peer, admin, postmaster, workload, n, job) {
  return inFreshDatabase(admin, workload, async (url) => {
    const queue = await peer.open(url);
    await fill(queue, n);
    const probe = new pg.Client({ connectionString: url });
    await probe.connect();
    let calls = 0;
    let allCalled;
    const called = new Promise((resolve) => { allCalled = resolve; });
    const handler = async (payload) => {
      await job(payload);
      if (++calls === n) allCalled();
    };
    let stop;
    const m = await measured(postmaster, n, async () => {
      stop = await queue.work(handler);
      await called;
      while ((await probe.query(queue.unfinished)).rows[0].n > 0) await sleep(2);
    });
    await stop();
    await probe.end();
    await queue.close();
    return m;
  });
}

async function main() {
  const peer = PEERS[peerName];
  if (!peer) throw new Error(`unknown peer ${peerName}: use one of ${Object.keys(PEERS).join(', ')}`);
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  const postmaster = await findPostmaster(admin);
  const results = { settings: JSON.stringify({ concurrency: CONC, ...peer.settings }) };

  if (WORKLOADS.includes('enqueue')) {
    // 1. Enqueue: batches of 1000 into an empty queue.
    const m = await inFreshDatabase(admin, 'enqueue', async (url) => {
      const queue = await peer.open(url);
      const r = await measured(postmaster, JOBS, () => fill(queue, JOBS));
      await queue.close();
      return r;
    });
    results['enqueue, batches of 1000'] = m.rate;
    results['enqueue: PostgreSQL server CPU per job'] = m.serverUs;
  }
  if (WORKLOADS.includes('noop')) {
    // 2. No-op jobs: a backlog of JOBS drained at the given concurrency.
    const m = await drain(peer, admin, postmaster, 'noop', JOBS, async () => {});
    results[`no-op jobs, concurrency ${CONC}`] = m.rate;
    results['no-op: PostgreSQL server CPU per job'] = m.serverUs;
    results['no-op: client process CPU per job'] = m.clientUs;
  }
  if (WORKLOADS.includes('http')) {
    // 3. HTTP dispatch: each job a POST to the receiver; a status outside 2xx fails the attempt.
    const m = await drain(peer, admin, postmaster, 'http', HTTP_JOBS, async () => {
      const s = await post(receiver);
      if (s < 200 || s >= 300) throw new Error(`status ${s}`);
    });
    results[`HTTP dispatch, concurrency ${CONC}`] = m.rate;
    results['HTTP dispatch: PostgreSQL server CPU per job'] = m.serverUs;
    results['HTTP dispatch: client process CPU per job'] = m.clientUs;
  }
  await admin.end();
  console.log(JSON.stringify(results));
  process.exit(0);
}

main().catch((e) => { console.error(e); process.exit(1); });
