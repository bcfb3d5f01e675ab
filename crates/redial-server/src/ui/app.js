// Redial's dashboard: a page per route (#/, #/triage, #/jobs, #/job/ID, #/endpoints, #/schedules), drawn from
// the same JSON API as every client. Text from the server is put in the page as text, never as
// markup. The token lives in this tab's session storage and goes in the Authorization header.
'use strict';

const REFRESH_MS = 5000;
// While the event stream is up, the page is drawn again on each event, and this often anyway
// (for what no event tells: jobs enqueued, running, counts).
const LIVE_REFRESH_MS = 30000;
// Events that come together are drawn once.
const LIVE_GATHER_MS = 250;
const state = {
  token: sessionStorage.getItem('redial-token') || '',
  readOnly: false,
  paused: false,
  timer: null,
  busy: false,
  // The event stream: whether it is up, the last event's id (to resume after it), the pending
  // redraw, and the controller that ends it.
  live: false,
  lastEvent: null,
  liveRedraw: null,
  liveAbort: null,
};

// ---- plumbing ----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
  });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!resp.ok) {
    const err = (data && data.error) || {};
    if (resp.status === 401) showLogin(err.message);
    throw new ApiError(resp.status, err.code || 'error', err.message || `${resp.status} ${resp.statusText}`);
  }
  return data;
}

// Builds an element; strings become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// Appends the children that are there (a missing optional part is null).
function put(parent, ...children) {
  parent.append(...children.flat().filter(c => c !== null && c !== undefined && c !== false));
}

function table(headers, rows, caption) {
  return el('div', { class: 'scroll' },
    el('table', {},
      caption ? el('caption', { class: 'muted' }, caption) : null,
      el('thead', {}, el('tr', {}, headers.map(h => el('th', { scope: 'col', class: h.num ? 'num' : null }, h.label || h)))),
      el('tbody', {}, rows)));
}

const fmtTime = t => (t ? new Date(t).toLocaleString() : '');
const fmtNum = n => Number(n || 0).toLocaleString();
const plural = (n, word) => `${fmtNum(n)} ${word}${n === 1 ? '' : 's'}`;
const byId = id => document.getElementById(id);
// Seconds in words: "45s", "12m 5s", "3h 20m", "2d 4h".
function fmtSecs(secs) {
  const s = Math.ceil(secs);
  if (s < 60) return `${s}s`;
  const parts = [[86400, 'd'], [3600, 'h'], [60, 'm'], [1, 's']];
  const out = [];
  let left = s;
  for (const [size, unit] of parts) {
    if (left >= size && out.length < 2) { out.push(`${Math.floor(left / size)}${unit}`); left %= size; } else if (out.length) break;
  }
  return out.join(' ');
}

// A pace in words: a second, a minute or an hour, whichever shows it best.
function paceText(perSecond) {
  if (perSecond >= 1) return `${perSecond.toFixed(1)}/s`;
  if (perSecond * 60 >= 1) return `${(perSecond * 60).toFixed(1)}/min`;
  return `${(perSecond * 3600).toFixed(2)}/h`;
}

// A backlog's forecast in words: when it drains, and the deadlines at risk.
function forecastText(f) {
  if (!f || f.waiting === 0) return ['nothing waits', ''];
  const drains = f.drains_at != null
    ? `${f.drain_seconds > 2 * 86400 ? `at ${fmtTime(f.drains_at)}` : `in ${fmtSecs(f.drain_seconds)} (${fmtTime(f.drains_at)})`}: ${plural(f.waiting, 'job')}${f.jobs_per_second != null ? ` at ${paceText(f.jobs_per_second)}` : ''}, limited by ${f.limited_by}`
    : `not known: ${f.limited_by}`;
  const risk = `${fmtNum(f.deadline_at_risk)} of ${fmtNum(f.with_deadline)} with a deadline`
    + (f.first_at_risk ? `; the first is due by ${fmtTime(f.first_at_risk.deadline)}, forecast to start ${f.first_at_risk.forecast_start ? fmtTime(f.first_at_risk.forecast_start) : 'when resumed'}` : '');
  return [drains, risk];
}

function toast(text) {
  const t = byId('toast');
  t.textContent = text;
  t.classList.add('show');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove('show'), 6000);
}

// Asks before acting; resolves true on confirmation.
function confirmAction(text, verb) {
  const d = byId('confirm');
  byId('confirm-text').textContent = text;
  byId('confirm-ok').textContent = verb;
  return new Promise(resolve => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.showModal();
  });
}

// Asks why and for how long; resolves the pause's body, or null when cancelled.
function askPause(text) {
  const d = byId('pause');
  byId('pause-text').textContent = text;
  byId('pause-reason').value = '';
  byId('pause-for').value = '';
  return new Promise(resolve => {
    d.addEventListener('close', () => {
      if (d.returnValue !== 'ok') { resolve(null); return; }
      const body = {};
      const reason = byId('pause-reason').value.trim();
      if (reason) body.reason = reason;
      if (byId('pause-for').value) body.for = byId('pause-for').value;
      resolve(body);
    }, { once: true });
    d.returnValue = '';
    d.showModal();
  });
}

// Pauses a queue or an endpoint by hand, after asking why and for how long.
async function pauseTarget(kind, name, effect) {
  const body = await askPause(`Pause ${kind} ${name}? ${effect}`);
  if (!body) return;
  try {
    await api('POST', `/v1/${kind}s/${encodeURIComponent(name)}/pause`, body);
    toast(`${kind} ${name} paused`);
    render();
  } catch (e) { toast(e.message); }
}

// Resumes a queue or an endpoint, or resets an endpoint's breaker, after a confirmation.
async function controlTarget(kind, name, path, question, done) {
  if (!await confirmAction(question, path === 'resume' ? 'Resume' : 'Reset')) return;
  try {
    await api('POST', `/v1/${kind}s/${encodeURIComponent(name)}/${path}`, {});
    toast(done);
    render();
  } catch (e) { toast(e.message); }
}

// "until resumed" or "until <time>", and why.
function pausedText(p) {
  const until = p.until ? `until ${fmtTime(p.until)}` : 'until resumed';
  return `paused by hand ${until}${p.reason ? ': ' + p.reason : ''}`;
}

function query(hash) {
  const i = hash.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : hash.slice(i + 1));
}

const DEAD_FILTER = ['queue', 'category', 'endpoint', 'since', 'until', 'pattern'];

function filterBody(params) {
  const body = {};
  for (const k of DEAD_FILTER) if (params.get(k)) body[k] = params.get(k);
  if (Object.keys(body).length === 0) body.all = true;
  return body;
}

function describe(body) {
  if (body.all) return 'every dead letter';
  const say = { since: 'created from', until: 'created before', pattern: 'reason like' };
  const time = k => k === 'since' || k === 'until';
  return Object.entries(body).map(([k, v]) => `${say[k] || k} ${time(k) ? fmtTime(v) : v}`).join(', ');
}

// Follows a bulk operation until it ends, its progress in the toast; resolves to how it ended.
async function followOperation(op, doing) {
  while (op.state === 'running') {
    toast(`${doing}: ${fmtNum(Math.min(op.done, op.total))} of ${fmtNum(op.total)} dead jobs`);
    await new Promise(resolve => setTimeout(resolve, 500));
    op = await api('GET', `/v1/operations/${encodeURIComponent(op.id)}`);
  }
  if (op.state === 'failed') throw new Error(`stopped after ${fmtNum(op.done)} of ${fmtNum(op.total)}: ${op.error || 'the server log says why'}; run it again for the rest`);
  return op;
}

// ---- replay with changes --------------------------------------------------------------------------

// A form for a replay's changes: a field left empty changes nothing. `bulk` adds the URL prefix.
function patchForm(bulk) {
  const field = (label, name, attrs = {}) => el('label', {}, label, el('input', { name, ...attrs }));
  return el('form', { class: 'patch', onsubmit: e => e.preventDefault() },
    field('New URL', 'url', { placeholder: 'https://api.example.com/v2/charges' }),
    bulk ? [field('URL starting with', 'prefix_from', { placeholder: 'https://old.example.com' }),
      field('becomes', 'prefix_to', { placeholder: 'https://new.example.com' })] : null,
    el('label', {}, 'Set headers (one "Name: value" a line)', el('textarea', { name: 'set', rows: 2 })),
    field('Remove headers (comma-separated)', 'remove'),
    el('label', {}, 'New body (empty: unchanged)', el('textarea', { name: 'body', rows: 3 })),
    field('Timeout', 'timeout', { placeholder: '10s' }),
    field('Queue', 'queue'),
    field('Endpoint', 'endpoint'),
    el('label', { class: 'check' }, el('input', { type: 'checkbox', name: 'renew' }),
      'New idempotency key (the first request was wrong and must count as new)'));
}

// The replay's body a patch form asks for: the fields filled in only.
function patchBody(form) {
  const f = new FormData(form);
  const v = k => String(f.get(k) || '').trim();
  const patch = {};
  if (v('url')) patch.url = v('url');
  if (v('prefix_from')) patch.url_prefix = { from: v('prefix_from'), to: v('prefix_to') };
  const set = {};
  for (const line of v('set').split('\n')) {
    const i = line.indexOf(':');
    if (i > 0) set[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  const remove = v('remove').split(',').map(h => h.trim()).filter(Boolean);
  if (Object.keys(set).length > 0 || remove.length > 0) patch.headers = { set, remove };
  if (f.get('body')) patch.body = String(f.get('body'));
  for (const k of ['timeout', 'queue', 'endpoint']) if (v(k)) patch[k] = v(k);
  const body = { patch };
  if (f.get('renew')) body.key = 'renew';
  return body;
}

function previewList(p) {
  const line = r => `${r.request.method} ${r.request.url}`;
  return el('div', { id: 'replay-preview' },
    el('p', { id: 'replay-preview-summary' }, `${plural(p.affected, 'dead job')} would be replayed, ${fmtNum(p.skipped)} skipped (the patch is not for them), of ${fmtNum(p.matched)} matched. Nothing was changed.`),
    p.preview.map(i => el('div', { class: 'card', 'data-preview': i.id },
      el('strong', {}, i.id),
      el('ul', {}, (i.changed.length > 0 ? i.changed : ['nothing changes: replayed as it was']).map(c => el('li', {}, c))),
      el('div', { class: 'muted' }, 'before: ', el('code', {}, line(i.before))),
      el('div', {}, 'after: ', el('code', {}, line(i.after))))));
}

// "Replay with changes": a preview first, then the replay after a confirmation that says how
// many. `path` is the replay route, `base` what the body carries besides the changes (a filter).
function replayEditor(path, base, bulk) {
  const form = patchForm(bulk);
  const out = el('div', { 'aria-live': 'polite' });
  const fail = e => out.replaceChildren(el('p', { class: 'error', role: 'alert' }, e.message));
  const preview = async () => {
    try {
      const p = await api('POST', path, { ...base, ...patchBody(form), dry_run: true });
      out.replaceChildren(previewList(p));
      return p;
    } catch (e) { fail(e); return null; }
  };
  const apply = async () => {
    const p = await preview();
    if (!p || !await confirmAction(`Replay ${plural(p.affected, 'dead job')} with these changes?`, 'Replay')) return;
    try {
      const r = await api('POST', path, { ...base, ...patchBody(form) });
      toast(bulk ? `${fmtNum(r.affected)} replayed with changes${r.skipped ? `, ${fmtNum(r.skipped)} skipped` : ''}` : `${r.id}: replayed with changes`);
      form.closest('details').open = false;
      render();
    } catch (e) { fail(e); }
  };
  return el('details', { class: 'editor', id: 'replay-edit' },
    el('summary', {}, 'Replay with changes…'),
    form,
    el('p', {}, el('button', { type: 'button', id: 'replay-preview-button', onclick: preview }, 'Preview'), ' ',
      el('button', { type: 'button', class: 'primary', id: 'replay-apply', onclick: apply }, 'Replay with changes')),
    out);
}

// ---- charts ------------------------------------------------------------------------------------

function svg(tag, attrs, ...children) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children.flat()) if (c) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const W = 600, H = 120, TOP = 18;

// A chart of the last hour: stacked bars (`stack`) or lines (`lines`), one column a minute, with
// a legend of totals and a text description for screen readers.
function chart(id, title, minutes, defs, kind, unit) {
  const values = minutes.map(m => defs.map(d => d.value(m) || 0));
  const peak = Math.max(1, ...values.map(v => (kind === 'stack' ? v.reduce((a, b) => a + b, 0) : Math.max(...v))));
  const col = W / minutes.length;
  const y = v => H - (v / peak) * (H - TOP);
  const marks = [];
  if (kind === 'stack') {
    values.forEach((v, i) => {
      let base = 0;
      v.forEach((n, k) => {
        if (n > 0) marks.push(svg('rect', { x: i * col + 1, y: y(base + n), width: Math.max(1, col - 2), height: y(base) - y(base + n), fill: defs[k].color },
          svg('title', {}, `${fmtTime(minutes[i].at)}: ${fmtNum(n)} ${defs[k].label}`)));
        base += n;
      });
    });
  } else {
    defs.forEach((d, k) => {
      const pts = values.map((v, i) => (v[k] ? `${i * col + col / 2},${y(v[k])}` : null)).filter(Boolean);
      if (pts.length > 0) marks.push(svg('polyline', { points: pts.join(' '), fill: 'none', stroke: d.color, 'stroke-width': 2 }));
      values.forEach((v, i) => { if (v[k]) marks.push(svg('circle', { cx: i * col + col / 2, cy: y(v[k]), r: 2.5, fill: d.color }, svg('title', {}, `${fmtTime(minutes[i].at)}: ${d.label} ${fmtNum(v[k])} ${unit}`))); });
    });
  }
  const totals = defs.map((d, k) => (kind === 'stack' ? values.reduce((a, v) => a + v[k], 0) : Math.max(0, ...values.map(v => v[k]))));
  const say = (d, k) => (kind === 'stack' ? `${d.label}: ${fmtNum(totals[k])}` : `${d.label}: peak ${fmtNum(totals[k])} ${unit}`);
  const summary = defs.map((d, k) => say(d, k).replace(':', '')).join(', ');
  return el('figure', { class: 'chart', id },
    el('figcaption', {}, title),
    svg('svg', { viewBox: `0 0 ${W} ${H + 20}`, role: 'img', 'aria-label': `${title}, last hour: ${summary}` },
      svg('line', { x1: 0, y1: H, x2: W, y2: H, stroke: '#d0d7de' }),
      svg('text', { x: 2, y: 14, class: 'axis' }, `${fmtNum(peak)}${unit ? ' ' + unit : ''}`),
      svg('text', { x: 2, y: H + 17, class: 'axis' }, '60 min ago'),
      svg('text', { x: W - 2, y: H + 17, class: 'axis', 'text-anchor': 'end' }, 'now'),
      marks),
    el('ul', { class: 'legend' }, defs.map((d, k) => el('li', { 'data-series': d.key },
      el('span', { class: `swatch s-${d.key}` }), say(d, k)))));
}

const ATTEMPT_SERIES = [
  { key: 'success', label: 'success', color: '#1a7f37' },
  { key: 'defer', label: 'deferred', color: '#8a5a00' },
  { key: 'transient', label: 'transient', color: '#d4631c' },
  { key: 'unknown', label: 'unknown', color: '#7a3fb8' },
  { key: 'permanent', label: 'permanent', color: '#b3261e' },
].map(d => ({ ...d, value: m => m.attempts[d.key] }));

function charts(minutes) {
  return el('div', { class: 'charts' },
    chart('chart-attempts', 'Attempts per minute, by category', minutes, ATTEMPT_SERIES, 'stack', ''),
    chart('chart-finished', 'Jobs finished per minute', minutes, [
      { key: 'completed', label: 'completed', color: '#1a7f37', value: m => m.completed },
      { key: 'dead', label: 'dead', color: '#b3261e', value: m => m.dead }], 'stack', ''),
    chart('chart-latency', 'Attempt latency', minutes, [
      { key: 'p50', label: 'p50', color: '#0a5cc2', value: m => m.p50_ms },
      { key: 'p99', label: 'p99', color: '#b3261e', value: m => m.p99_ms }], 'lines', 'ms'));
}

// ---- pages -------------------------------------------------------------------------------------

const CATEGORIES = ['permanent', 'transient_exhausted', 'unknown_exhausted', 'deferral_exhausted',
  'deadline_exceeded', 'budget_exhausted'];
const STATES = ['scheduled', 'ready', 'running', 'deferred', 'completed', 'dead', 'cancelled'];

async function overview(main) {
  const [stats, alerts, configured, series] = await Promise.all([api('GET', '/v1/stats'), api('GET', '/v1/alerts'),
    api('GET', '/v1/queues'), api('GET', '/v1/series')]);
  const queues = {};
  const pauses = {};
  for (const q of configured.queues) { queues[q.name] = {}; pauses[q.name] = q.paused_by_hand; }
  const dead = {};
  for (const c of stats.queues) {
    queues[c.queue] = queues[c.queue] || {};
    queues[c.queue][c.state] = (queues[c.queue][c.state] || 0) + c.count;
    if (c.state === 'dead' && c.category) dead[c.category] = (dead[c.category] || 0) + c.count;
  }
  const total = s => Object.values(queues).reduce((n, q) => n + (q[s] || 0), 0);
  const firing = (alerts.alerts || []).filter(a => a.firing);
  put(main,
    el('h1', {}, 'Overview'),
    el('div', { class: 'cards' },
      ['ready', 'running', 'deferred', 'dead', 'completed'].map(s =>
        el('div', { class: 'card' }, el('div', { class: 'muted' }, s),
          el('div', { class: `n state-${s}`, 'data-count': s }, fmtNum(total(s)))))),
    el('h2', {}, 'Last hour (this node)'),
    charts(series.minutes),
    el('h2', {}, 'Queues'),
    table([{ label: 'Queue' }, ...STATES.map(s => ({ label: s, num: true })), 'Leasing'],
      Object.keys(queues).sort().map(q => el('tr', { 'data-queue': q }, el('th', { scope: 'row' }, q in pauses
        ? el('a', { href: groupsHref(q), title: `${q}: its groups (tenants) with work` }, q) : q),
        STATES.map(s => el('td', { class: 'num' }, (queues[q][s] || 0) > 0 && ['dead', 'deferred'].includes(s)
          ? el('a', { href: `#/jobs?queue=${encodeURIComponent(q)}&state=${s}` }, fmtNum(queues[q][s]))
          : fmtNum(queues[q][s]))),
        el('td', { class: pauses[q] ? 'warn' : 'muted' }, pauses[q] ? pausedText(pauses[q]) : (q in pauses ? 'on' : 'not configured'),
          q in pauses ? [' ', el('a', { href: orderingHref(q), class: 'ordering-link', title: `${q}: its ordering keys` }, 'keys')] : null,
          state.readOnly || !(q in pauses) ? null : [' ', pauses[q]
            ? el('button', { type: 'button', onclick: () => controlTarget('queue', q, 'resume', `Resume queue ${q}? Its jobs are leased again at once.`, `queue ${q} resumed`) }, 'Resume')
            : el('button', { type: 'button', class: 'danger', onclick: () => pauseTarget('queue', q, 'None of its jobs will be leased; those running finish.') }, 'Pause')])))),
    el('h2', {}, 'Dead letters by category'),
    Object.keys(dead).length === 0 ? el('p', { class: 'muted' }, 'No dead letters.')
      : table([{ label: 'Category' }, { label: 'Jobs', num: true }],
        Object.entries(dead).sort((a, b) => b[1] - a[1]).map(([c, n]) => el('tr', {},
          el('td', {}, el('a', { href: `#/triage?category=${c}` }, c)), el('td', { class: 'num' }, fmtNum(n))))),
    el('h2', {}, 'Alerts'),
    firing.length === 0 ? el('p', { class: 'muted' }, 'No alert is firing.')
      : table(['Alert', 'Since', 'Value', 'Threshold'], firing.map(a => el('tr', {},
        el('td', { class: 'bad' }, a.name), el('td', {}, fmtTime(a.since)), el('td', {}, String(a.value ?? '')),
        el('td', {}, String(a.threshold ?? ''))))),
    (stats.oldest_deferred || []).length === 0 ? null : el('div', {},
      el('h2', {}, 'Deferred work'),
      table(['Queue', 'Deferred since'], stats.oldest_deferred.map(d => el('tr', {},
        el('td', {}, el('a', { href: `#/jobs?queue=${encodeURIComponent(d.queue)}&state=deferred` }, d.queue)),
        el('td', {}, fmtTime(d.since)))))),
  );
}

// A datetime-local field's value (the browser's local time) as RFC 3339, or '' when empty.
const toInstant = v => (v ? new Date(v).toISOString() : '');
// An RFC 3339 instant as a datetime-local field's value.
function toLocalField(t) {
  if (!t) return '';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return '';
  const pad = n => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

async function triage(main, params) {
  const qs = new URLSearchParams();
  for (const k of DEAD_FILTER) if (params.get(k)) qs.set(k, params.get(k));
  // The patterns under the same filter but the pattern itself, so that the chosen one stays in
  // view beside the others.
  const pqs = new URLSearchParams(qs);
  pqs.delete('pattern');
  pqs.set('limit', '50');
  const [data, causes] = await Promise.all([
    api('GET', '/v1/dead-letters/groups?' + qs),
    api('GET', '/v1/dead-letters/patterns?' + pqs),
  ]);
  const body = filterBody(params);
  const chosen = params.get('pattern') || '';
  const form = el('form', { class: 'filters', role: 'search', onsubmit: e => {
    e.preventDefault();
    const f = new FormData(e.target);
    const next = new URLSearchParams();
    for (const [k, v] of f) if (v) next.set(k, ['since', 'until'].includes(k) ? toInstant(v) : v);
    location.hash = '#/triage?' + next;
  } },
  el('label', {}, 'Queue', el('input', { name: 'queue', value: params.get('queue') || '' })),
  el('label', {}, 'Category', el('select', { name: 'category' }, el('option', { value: '' }, 'any'),
    CATEGORIES.map(c => el('option', { value: c, selected: params.get('category') === c }, c)))),
  el('label', {}, 'Endpoint', el('input', { name: 'endpoint', value: params.get('endpoint') || '', placeholder: 'https://api.example.com' })),
  el('label', {}, 'Created from', el('input', { name: 'since', type: 'datetime-local', value: toLocalField(params.get('since')) })),
  el('label', {}, 'Created before', el('input', { name: 'until', type: 'datetime-local', value: toLocalField(params.get('until')) })),
  el('label', {}, 'Reason pattern', el('input', { name: 'pattern', value: chosen, placeholder: 'timeout after <n> ms' })),
  el('button', { type: 'submit' }, 'Filter'));
  const act = async (verb, filter, count) => {
    const ok = await confirmAction(`${verb} ${fmtNum(count)} dead ${count === 1 ? 'job' : 'jobs'} (${describe(filter)})?`, verb);
    if (!ok) return;
    try {
      // A chunk at a time on the server; its progress shown until it ends.
      const done = await followOperation(await api('POST', `/v1/dead-letters/${verb.toLowerCase()}`, { ...filter, wait: false }),
        verb === 'Replay' ? 'Replaying' : 'Dismissing');
      toast(`${fmtNum(done.done)} ${verb === 'Replay' ? 'replayed' : 'dismissed'}${done.state === 'done' ? '' : ` (${done.state})`}`);
      render();
    } catch (e) { toast(e.message); }
  };
  put(main,
    el('h1', {}, 'Dead letters'),
    form,
    el('p', { id: 'triage-total' }, `${fmtNum(data.total)} dead ${data.total === 1 ? 'letter matches' : 'letters match'}`),
    state.readOnly || data.total === 0 ? null : el('p', {},
      el('button', { type: 'button', class: 'primary', onclick: () => act('Replay', body, data.total) }, 'Replay all matching'), ' ',
      el('button', { type: 'button', class: 'danger', onclick: () => act('Dismiss', body, data.total) }, 'Dismiss all matching')),
    state.readOnly || data.total === 0 ? null : replayEditor('/v1/dead-letters/replay', body, true),
    data.groups.length === 0 ? el('p', { class: 'muted' }, 'Nothing to triage.')
      : table(['Queue', 'Category', 'Endpoint', { label: 'Jobs', num: true }, 'First', 'Last', 'Reason (one of them)', ''],
        data.groups.map(g => {
          const f = { queue: g.queue, category: g.category, endpoint: g.endpoint };
          for (const k of ['since', 'until', 'pattern']) if (body[k]) f[k] = body[k];
          const list = '#/jobs?' + new URLSearchParams({ state: 'dead', ...f });
          return el('tr', { 'data-group': `${g.queue} ${g.category} ${g.endpoint}` },
            el('td', {}, g.queue), el('td', { class: 'bad' }, g.category), el('td', {}, el('code', {}, g.endpoint)),
            el('td', { class: 'num' }, el('a', { href: list }, fmtNum(g.count))),
            el('td', {}, fmtTime(g.first)), el('td', {}, fmtTime(g.last)),
            el('td', { class: 'reason' }, g.reason || ''),
            el('td', {}, state.readOnly ? null : [
              el('button', { type: 'button', onclick: () => act('Replay', f, g.count) }, 'Replay'), ' ',
              el('button', { type: 'button', class: 'danger', onclick: () => act('Dismiss', f, g.count) }, 'Dismiss')]));
        })),
    el('h2', { id: 'causes' }, 'By cause'),
    el('p', { class: 'muted' }, 'Reasons with their numbers, ids, times and quoted values masked: one row per cause, whatever the details.'),
    causes.patterns.length === 0 ? el('p', { class: 'muted' }, 'No reason to show.')
      : table(['Reason pattern', { label: 'Jobs', num: true }, { label: 'Reasons', num: true }, 'First', 'Last', ''],
        causes.patterns.map(p => {
          const f = { ...body, pattern: p.pattern };
          delete f.all;
          const here = new URLSearchParams(params);
          here.set('pattern', p.pattern);
          const list = '#/jobs?' + new URLSearchParams({ state: 'dead', ...f });
          return el('tr', { 'data-pattern': p.pattern, class: p.pattern === chosen ? 'chosen' : null },
            el('td', { class: 'reason' }, el('code', { title: 'e.g. ' + p.example }, p.pattern)),
            el('td', { class: 'num' }, el('a', { href: list }, fmtNum(p.count))),
            el('td', { class: 'num' }, fmtNum(p.reasons)),
            el('td', {}, fmtTime(p.first)), el('td', {}, fmtTime(p.last)),
            el('td', {},
              p.pattern === chosen ? null : el('a', { href: '#/triage?' + here }, 'Filter'), ' ',
              state.readOnly ? null : [
                el('button', { type: 'button', onclick: () => act('Replay', f, p.count) }, 'Replay'), ' ',
                el('button', { type: 'button', class: 'danger', onclick: () => act('Dismiss', f, p.count) }, 'Dismiss')]));
        }), causes.count > causes.patterns.length ? `the ${causes.patterns.length} largest of ${fmtNum(causes.count)} patterns` : null),
  );
}

async function jobs(main, params) {
  const qs = new URLSearchParams();
  for (const k of ['queue', 'state', 'category', 'endpoint', 'pattern', 'idempotency_key', 'tag', 'reason_text', 'cursor']) {
    if (params.get(k)) qs.set(k, params.get(k));
  }
  qs.set('limit', '50');
  const data = await api('GET', '/v1/jobs?' + qs);
  const form = el('form', { class: 'filters', role: 'search', onsubmit: e => {
    e.preventDefault();
    const f = new FormData(e.target);
    const id = (f.get('id') || '').trim();
    if (id) { location.hash = '#/job/' + encodeURIComponent(id); return; }
    const next = new URLSearchParams();
    for (const [k, v] of f) if (v && k !== 'id') next.set(k, v);
    location.hash = '#/jobs?' + next;
  } },
  el('label', {}, 'Job id', el('input', { name: 'id', placeholder: 'find a job by id' })),
  el('label', {}, 'State', el('select', { name: 'state' }, el('option', { value: '' }, 'any'),
    STATES.map(s => el('option', { value: s, selected: params.get('state') === s }, s)))),
  el('label', {}, 'Queue', el('input', { name: 'queue', value: params.get('queue') || '' })),
  el('label', {}, 'Category', el('select', { name: 'category' }, el('option', { value: '' }, 'any'),
    CATEGORIES.map(c => el('option', { value: c, selected: params.get('category') === c }, c)))),
  el('label', {}, 'Endpoint', el('input', { name: 'endpoint', value: params.get('endpoint') || '' })),
  el('label', {}, 'Reason pattern', el('input', { name: 'pattern', value: params.get('pattern') || '', placeholder: 'dead letters only' })),
  el('label', {}, 'Reason words', el('input', { name: 'reason_text', value: params.get('reason_text') || '', placeholder: 'dead letters: cert expired' })),
  el('label', {}, 'Idempotency key', el('input', { name: 'idempotency_key', value: params.get('idempotency_key') || '', placeholder: 'exactly, as sent' })),
  el('label', {}, 'Tag', el('input', { name: 'tag', value: params.get('tag') || '', placeholder: 'exactly' })),
  el('button', { type: 'submit' }, 'Show'));
  const next = new URLSearchParams(params);
  if (data.next_cursor) next.set('cursor', data.next_cursor);
  put(main,
    el('h1', {}, 'Jobs'),
    form,
    data.jobs.length === 0 ? el('p', { class: 'muted' }, 'No job matches.')
      : table(['Job', 'Queue', 'State', 'Endpoint', { label: 'Requests', num: true }, 'Last reason', 'Updated'],
        data.jobs.map(j => el('tr', {},
          el('td', {}, el('a', { href: '#/job/' + encodeURIComponent(j.id) }, j.id)),
          el('td', {}, j.queue),
          el('td', { class: 'state-' + j.state }, j.state + (j.category ? ` (${j.category})` : '')),
          el('td', {}, el('code', {}, j.endpoint)),
          el('td', { class: 'num' }, String(j.runs)),
          el('td', { class: 'reason' }, j.last_reason || ''),
          el('td', {}, fmtTime(j.updated_at))))),
    data.next_cursor ? el('p', {}, el('a', { href: '#/jobs?' + next }, 'Next page')) : null,
  );
}

async function job(main, id, params) {
  const j = await api('GET', '/v1/jobs/' + encodeURIComponent(id));
  const act = async (verb, path) => {
    if (!await confirmAction(`${verb} job ${j.id}?`, verb)) return;
    try {
      await api('POST', `/v1/jobs/${encodeURIComponent(j.id)}/${path}`, {});
      toast(`${j.id}: ${verb.toLowerCase()} done`);
      if (path === 'dismiss') location.hash = '#/triage'; else render();
    } catch (e) { toast(e.message); }
  };
  const finished = ['completed', 'dead', 'cancelled'].includes(j.state);
  const attempts = j.attempt_log || [];
  const ms = v => (v === null || v === undefined ? '' : v < 1000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`);
  put(main,
    el('h1', {}, 'Job ', el('code', {}, j.id)),
    el('dl', { class: 'facts' },
      el('dt', {}, 'State'), el('dd', { class: 'state-' + j.state, id: 'job-state' }, j.state + (j.category ? ` (${j.category})` : '')),
      el('dt', {}, 'Why'), el('dd', {}, j.last_reason || ''),
      el('dt', {}, 'Queue'), el('dd', {}, j.queue),
      j.group ? [el('dt', {}, 'Group'), el('dd', {}, el('a', { href: groupsHref(j.queue) }, j.group))] : null,
      j.ordering_key ? [el('dt', {}, 'Ordering key'), el('dd', { id: 'job-ordering-key' }, el('a', { href: orderingHref(j.queue) }, j.ordering_key))] : null,
      el('dt', {}, 'Endpoint'), el('dd', {}, el('code', {}, j.endpoint)),
      el('dt', {}, 'Request'), el('dd', {}, el('code', {}, `${j.request.method} ${j.request.url}`), ` (${fmtNum(j.request.body_bytes)} bytes of body)`),
      j.request.credentials ? [el('dt', {}, 'Credentials'), el('dd', { id: 'job-credentials' }, `profile ${j.request.credentials} (instead of the endpoint's)`)] : null,
      j.original_request ? [el('dt', {}, 'Enqueued as'), el('dd', { id: 'job-original' },
        el('code', {}, `${j.original_request.method} ${j.original_request.url}`), ` (${fmtNum(j.original_request.body_bytes)} bytes of body)`)] : null,
      el('dt', {}, 'Headers'), el('dd', {}, j.request.headers.length === 0 ? 'none' : j.request.headers.map(([n, v]) => el('div', {}, el('code', {}, `${n}: ${v}`)))),
      el('dt', {}, 'Idempotency key'), el('dd', {}, el('code', {}, j.idempotency_key || 'none')),
      j.callback ? [el('dt', {}, 'Callback'), el('dd', { id: 'job-callback' },
        el('code', {}, j.callback.url), ` on ${j.callback.on.join(', ')}`,
        j.callback_delivery ? [' (', el('a', { href: '#/job/' + encodeURIComponent(j.callback_delivery), id: 'job-callback-delivery' }, 'its delivery'), ')'] : null)] : null,
      j.callback_for ? [el('dt', {}, 'Callback of'), el('dd', {},
        el('a', { href: '#/job/' + encodeURIComponent(j.callback_for), id: 'job-callback-for' }, j.callback_for))] : null,
      el('dt', {}, 'Created'), el('dd', {}, fmtTime(j.created_at)),
      el('dt', {}, 'Next run'), el('dd', {}, finished ? 'none' : fmtTime(j.run_at)),
      el('dt', {}, 'Counts'), el('dd', {}, `${plural(j.runs, 'request')}, ${j.attempts} failed, ${plural(j.deferrals, 'deferral')}, ${plural(j.replays, 'replay')}`)),
    state.readOnly ? null : el('p', {},
      j.state === 'dead' ? [el('button', { type: 'button', class: 'primary', onclick: () => act('Replay', 'replay') }, 'Replay'), ' ',
        el('button', { type: 'button', class: 'danger', onclick: () => act('Dismiss', 'dismiss') }, 'Dismiss')] : null,
      !finished ? el('button', { type: 'button', class: 'danger', onclick: () => act('Cancel', 'cancel') }, 'Cancel') : null),
    !state.readOnly && j.state === 'dead' ? replayEditor(`/v1/jobs/${encodeURIComponent(j.id)}/replay`, {}, false) : null,
    el('h2', {}, 'Attempts'),
    attempts.length === 0 ? el('p', { class: 'muted' }, 'No attempt yet.')
      : table(['#', 'Started', { label: 'Took', num: true }, 'Result', 'Category', 'Decision', 'Delay', 'Server wait', 'Why'],
        timeline(attempts, j.changes || []).map(a => a.changed ? el('tr', { class: 'change' },
          el('td', {}, ''), el('td', {}, fmtTime(a.at)),
          el('td', { colspan: 7 }, el('strong', {}, `Replayed with changes (replay ${a.replay}): `), a.changed.join('; '))) : el('tr', { class: 'attempt' },
          el('td', {}, String(a.number)), el('td', {}, fmtTime(a.started_at)), el('td', { class: 'num' }, ms(a.duration_ms)),
          el('td', {}, a.status ? String(a.status) : (a.error || '')),
          el('td', {}, a.category), el('td', {}, a.decision + (a.dead_category ? ` (${a.dead_category})` : '')),
          el('td', {}, ms(a.delay_ms)), el('td', {}, a.server_wait_ms ? `${ms(a.server_wait_ms)} (${a.server_wait_source || ''})` : ''),
          el('td', { class: 'reason' }, a.reason, a.error_detail ? el('div', { class: 'muted' }, a.error_detail) : null,
            a.held ? el('div', { class: 'muted' }, `held before it by ${a.held}`) : null)))),
  );
  // #/job/ID?replay opens its "Replay with changes" form (a link to send someone to it).
  const editor = main.querySelector('#replay-edit');
  if (editor && params && params.has('replay')) editor.open = true;
}

// A job's attempts with its replays' changes between them, in the order they happened.
function timeline(attempts, changes) {
  const out = [];
  let i = 0;
  for (const a of attempts) {
    while (i < changes.length && new Date(changes[i].at) <= new Date(a.started_at)) out.push(changes[i++]);
    out.push(a);
  }
  return out.concat(changes.slice(i));
}

// The actions on one endpoint: pause or resume, and reset an open breaker.
function endpointActions(e) {
  if (state.readOnly) return null;
  const paused = e.paused_by_hand || e.paused_until || e.quarantined_since;
  return [
    paused
      ? el('button', { type: 'button', onclick: () => controlTarget('endpoint', e.name, 'resume',
        `Resume endpoint ${e.name}? Its held jobs go at once${e.paused_until ? ', and the pause its answers set ends too' : ''}${e.quarantined_since ? ', and its quarantine ends (slow start follows)' : ''}.`, `endpoint ${e.name} resumed`) }, 'Resume')
      : el('button', { type: 'button', class: 'danger', onclick: () => pauseTarget('endpoint', e.name, 'Every job of it is held, on every node.') }, 'Pause'),
    e.breaker === 'closed' ? null : [' ', el('button', { type: 'button', onclick: () => controlTarget('endpoint', e.name, 'reset-breaker',
      `Close the breaker of ${e.name} now? Its window is emptied and its jobs go again.`, `breaker of ${e.name} reset`) }, 'Reset breaker')],
    e.outage_began ? [' ', el('button', { type: 'button', onclick: () => replayOutage(e) }, 'Replay what died since the outage began')] : null,
  ];
}

// Replays the endpoint's dead letters that died since its last outage began.
async function replayOutage(e) {
  if (!await confirmAction(`Replay the dead letters of ${e.name} that died since its outage began (${fmtTime(e.outage_began)})?`, 'Replay')) return;
  try {
    const r = await api('POST', `/v1/endpoints/${encodeURIComponent(e.name)}/replay-outage`, {});
    toast(`${plural(r.affected, 'dead letter')} of ${e.name} replayed`);
    render();
  } catch (err) { toast(err.message); }
}

// The breaker's state in words, with quarantine.
function breakerText(e) {
  if (e.quarantined_since) return `quarantined since ${fmtTime(e.quarantined_since)}` + (e.breaker_until ? `, next probe ${fmtTime(e.breaker_until)}` : '');
  return e.breaker + (e.breaker_until ? ` until ${fmtTime(e.breaker_until)}` : '');
}

const endpointHref = name => '#/endpoint/' + encodeURIComponent(name);
const groupsHref = queue => '#/groups/' + encodeURIComponent(queue);
const orderingHref = (queue, blocked) => '#/ordering/' + encodeURIComponent(queue) + (blocked ? '?blocked=true' : '');

// One queue's ordering keys with a line: each key's head (the job that goes first), how many
// wait behind it and why; blocked keys (a dead head) can have their head replayed from here.
async function ordering(main, queue, params) {
  const blocked = params.get('blocked') === 'true';
  const qs = pageQuery(params);
  if (blocked) qs.set('blocked', 'true');
  const data = await api('GET', `/v1/queues/${encodeURIComponent(queue)}/ordering-keys?` + qs);
  const replay = async id => {
    if (!await confirmAction(`Replay job ${id}? It goes first in its key again; the jobs behind it follow.`, 'Replay')) return;
    try {
      await api('POST', `/v1/jobs/${encodeURIComponent(id)}/replay`, {});
      toast(`${id}: replayed`);
      render();
    } catch (e) { toast(e.message); }
  };
  const next = new URLSearchParams();
  if (blocked) next.set('blocked', 'true');
  if (data.next_cursor) next.set('cursor', data.next_cursor);
  put(main,
    el('h1', {}, 'Ordering keys of ', el('code', {}, queue)),
    el('p', { class: 'muted' }, `A key's jobs start one at a time, in the order they were enqueued. A dead head ` +
      (data.ordering_on_dead === 'skip' ? 'lets the next job go (ordering_on_dead = skip).' : 'blocks its key until it is replayed or dismissed (ordering_on_dead = block).')),
    el('p', {}, blocked
      ? el('a', { href: orderingHref(queue, false), id: 'ordering-all' }, 'Show every key')
      : el('a', { href: orderingHref(queue, true), id: 'ordering-blocked' }, 'Show blocked keys only')),
    data.keys.length === 0 ? el('p', { class: 'muted' }, blocked ? 'No key is blocked.' : 'No key has a line.')
      : table(['Key', 'Head', 'State', { label: 'Behind', num: true }, 'Why', ''],
        data.keys.map(k => el('tr', { 'data-key': k.key, class: k.blocked ? 'warn' : '' },
          el('th', { scope: 'row' }, k.key),
          el('td', {}, el('a', { href: '#/job/' + encodeURIComponent(k.head.id) }, el('code', {}, k.head.id))),
          el('td', { class: 'state-' + k.head.state }, k.head.state),
          el('td', { class: 'num' }, fmtNum(k.behind)),
          el('td', {}, k.why),
          el('td', {}, k.blocked && !state.readOnly
            ? el('button', { type: 'button', onclick: () => replay(k.head.id) }, 'Replay head') : null)))),
    data.next_cursor ? el('p', {}, el('a', { href: `#/ordering/${encodeURIComponent(queue)}?` + next }, 'Next page')) : null,
  );
}

// One queue's groups (tenants) with work, most waiting first, with their limits.
async function groups(main, queue) {
  const data = await api('GET', `/v1/queues/${encodeURIComponent(queue)}/groups?limit=200`);
  const limit = v => (v === null || v === undefined ? 'none' : String(v));
  put(main,
    el('h1', {}, 'Groups of ', el('code', {}, queue)),
    el('p', { class: 'muted' }, data.total === 0 ? 'No group has work in this queue.'
      : `${fmtNum(data.total)} ${data.total === 1 ? 'group has' : 'groups have'} work; leases take turns across them` +
        (data.groups.length < data.total ? ` (the ${fmtNum(data.groups.length)} with most waiting shown).` : '.')),
    data.groups.length === 0 ? null
      : table(['Group', { label: 'Waiting', num: true }, { label: 'Running', num: true }, { label: 'In flight here', num: true },
        'Concurrency', 'Rate', { label: 'Weight', num: true }, 'Drains in', { label: 'Deadlines at risk', num: true }],
      data.groups.map(g => el('tr', { 'data-group': g.group },
        el('th', { scope: 'row' }, g.group), el('td', { class: 'num' }, fmtNum(g.waiting)), el('td', { class: 'num' }, fmtNum(g.running)),
        el('td', { class: 'num' }, fmtNum(g.in_flight_here)), el('td', {}, limit(g.limits.concurrency)), el('td', {}, limit(g.limits.rate)),
        el('td', { class: 'num' }, String(g.limits.weight)),
        el('td', { class: 'drains', title: g.forecast.limited_by }, g.waiting === 0 ? '-' : g.forecast.drain_seconds == null ? 'not known'
          : g.forecast.drain_seconds > 2 * 86400 ? `at ${fmtTime(g.forecast.drains_at)}` : fmtSecs(g.forecast.drain_seconds)),
        el('td', { class: 'num at-risk' + (g.forecast.deadline_at_risk > 0 ? ' bad' : '') }, `${fmtNum(g.forecast.deadline_at_risk)} of ${fmtNum(g.forecast.with_deadline)}`)))),
  );
}

// A list page's query: its cursor (from the address) and a page of 100.
function pageQuery(params) {
  const qs = new URLSearchParams({ limit: '100' });
  if (params.get('cursor')) qs.set('cursor', params.get('cursor'));
  return qs;
}

// The link to a list's next page, when there is one.
function nextPage(route, data) {
  return data.next_cursor
    ? el('p', {}, el('a', { href: `${route}?` + new URLSearchParams({ cursor: data.next_cursor }) }, 'Next page'))
    : null;
}

async function endpoints(main, params) {
  const data = await api('GET', '/v1/endpoints?' + pageQuery(params));
  put(main,
    el('h1', {}, 'Endpoints'),
    data.endpoints.length === 0 ? el('p', { class: 'muted' }, 'No endpoint yet.')
      : table(['Endpoint', 'Holding', 'Breaker', { label: 'Held jobs', num: true }, 'Rate', 'Learned quota', 'In flight', 'Retry budget', ''],
        data.endpoints.map(e => el('tr', { 'data-endpoint': e.name },
          el('td', {}, el('a', { href: endpointHref(e.name) }, el('code', {}, e.name))),
          el('td', { class: e.holding ? 'warn holding' : 'muted holding' }, e.holding || 'nothing'),
          el('td', { class: e.breaker === 'closed' ? 'good' : 'bad' }, breakerText(e)),
          el('td', { class: 'num' }, fmtNum(e.held)),
          el('td', {}, e.rate || (e.learned_pace != null ? `learned ${e.learned_pace.toFixed(1)}/s` : 'none')),
          el('td', {}, e.learned_limit ? `${e.learned_remaining ?? '?'} of ${e.learned_limit}` : 'none'),
          el('td', { class: 'num' }, `${e.in_flight}${e.concurrency_limit ? ' / ' + e.concurrency_limit : ''}`),
          el('td', {}, `${e.budget_remaining} left`),
          el('td', {}, endpointActions(e))))),
    nextPage('#/endpoints', data),
  );
}

async function endpoint(main, name) {
  const e = await api('GET', '/v1/endpoints/' + encodeURIComponent(name));
  const jobsOf = s => `#/jobs?endpoint=${encodeURIComponent(e.name)}&state=${s}`;
  const [drains, risk] = forecastText(e.forecast);
  put(main,
    el('h1', {}, 'Endpoint ', el('code', {}, e.name)),
    el('p', {}, endpointActions(e)),
    el('dl', { class: 'facts' },
      el('dt', {}, 'Holding'), el('dd', { id: 'endpoint-holding', class: e.holding ? 'warn' : null }, e.holding || 'nothing'),
      el('dt', {}, 'Paused by hand'), el('dd', {}, e.paused_by_hand ? `${pausedText(e.paused_by_hand)} (since ${fmtTime(e.paused_by_hand.since)})` : 'no'),
      el('dt', {}, 'Paused by its answers'), el('dd', {}, e.paused_until ? `until ${fmtTime(e.paused_until)}: ${e.pause_reason || ''}` : 'no'),
      el('dt', {}, 'Jobs'), el('dd', {}, el('a', { href: jobsOf('ready') }, `${plural(e.held, 'job')} due and held`), `, ${fmtNum(e.waiting_later)} scheduled later`),
      el('dt', {}, 'Drains'), el('dd', { id: 'endpoint-drains' }, drains),
      el('dt', {}, 'Deadlines at risk'), el('dd', { id: 'endpoint-at-risk', class: e.forecast && e.forecast.deadline_at_risk > 0 ? 'bad' : null }, risk || 'none'),
      el('dt', {}, 'Breaker'), el('dd', { id: 'endpoint-breaker', class: e.breaker === 'closed' ? 'good' : 'bad' }, breakerText(e)),
      el('dt', {}, 'Failing'), el('dd', {}, e.failing_since ? `since ${fmtTime(e.failing_since)}` : 'no'),
      el('dt', {}, 'Last outage began'), el('dd', {}, e.outage_began ? fmtTime(e.outage_began) : 'none on record'),
      el('dt', {}, 'Breaker window'), el('dd', {}, `${fmtNum(e.breaker_window_failures)} failures (${fmtNum(e.breaker_window_retry_failures)} of retries) in ${plural(e.breaker_window_calls, 'call')}`),
      el('dt', {}, 'Retry budget'), el('dd', {}, `${fmtNum(e.budget_used)} used of ${fmtNum(e.budget_allowed)}, ${fmtNum(e.budget_remaining)} left`),
      el('dt', {}, 'Rate'), el('dd', {}, e.rate ? `${e.rate}, burst ${e.burst}` : 'none configured'),
      el('dt', {}, 'Learned pace'), el('dd', { id: 'endpoint-pace' }, e.learned_pace != null ? `${e.learned_pace.toFixed(1)} requests/s, learned from bare refusals (429s, a limiter's 503s)` : 'none learned'),
      el('dt', {}, 'Learned quota'), el('dd', {}, e.learned_limit ? `${e.learned_remaining ?? '?'} of ${e.learned_limit} left${e.learned_reset_at ? ', resets ' + fmtTime(e.learned_reset_at) : ''}` : 'none learned'),
      el('dt', {}, 'Concurrency'), el('dd', {}, `${e.in_flight} in flight${e.concurrency_limit ? ' of ' + e.concurrency_limit : ', no limit'}`),
      el('dt', {}, 'Slow start'), el('dd', {}, e.slow_start_since ? `since ${fmtTime(e.slow_start_since)}` : 'no'),
      el('dt', {}, 'Nodes'), el('dd', {}, e.nodes > 1 ? `${e.nodes}: the limits are divided among them; quota, concurrency and budget above are this node's part` : 'one'),
      el('dt', {}, 'Credentials'), el('dd', { id: 'endpoint-credentials' }, credentialsText(e.credentials)),
      ...(e.credentials && e.credentials.token ? [
        el('dt', {}, 'Token'), el('dd', { id: 'endpoint-token', class: e.credentials.token.held ? 'good' : 'warn' }, tokenText(e.credentials.token)),
        el('dt', {}, 'Last token failure'), el('dd', { id: 'endpoint-token-failure', class: e.credentials.token.last_failure ? 'bad' : null },
          e.credentials.token.last_failure ? `${fmtTime(e.credentials.token.last_failure.at)}: ${e.credentials.token.last_failure.reason}` : 'none'),
        el('dt', {}, 'Token endpoint'), el('dd', { id: 'endpoint-token-gate', class: e.credentials.token.held_until ? 'bad' : null },
          e.credentials.token.held_until ? `not asked until ${fmtTime(e.credentials.token.held_until)} (${fmtNum(e.credentials.token.failures)} failures in a row)` : 'may be asked'),
      ] : [])),
    el('h2', {}, 'Breaker history'),
    e.breaker_history.length === 0 ? el('p', { class: 'muted' }, 'The breaker has not moved.')
      : table(['When', 'To', 'Why'], e.breaker_history.slice().reverse().map(h => el('tr', { class: 'breaker-event' },
        el('td', {}, fmtTime(h.at)), el('td', { class: h.to === 'closed' ? 'good' : 'bad' }, h.to), el('td', { class: 'reason' }, h.reason))),
      'Newest first'),
  );
}

// An endpoint's credentials in words: "oauth2_client_credentials, client secret from env
// CRM_SECRET"; never a secret (the API has none to give).
function credentialsText(c) {
  if (!c) return 'none: its jobs carry their own headers';
  const what = c.kind === 'oauth2_client_credentials' ? 'client secret' : c.kind === 'mtls' ? 'private key' : 'secret';
  const cert = c.client_certificate && c.kind !== 'mtls' ? `; client certificate ${c.client_certificate}` : '';
  return `${c.kind}, ${what} from ${c.secret_from}${cert}` + (c.allow_job_credentials ? '; jobs may bring their own Authorization' : '');
}

// The OAuth2 token this node holds: "valid until 10:32:05 (3 fetched)", "none held".
function tokenText(t) {
  const fetched = `${plural(t.fetched, 'token')} fetched from ${t.token_url}`;
  if (!t.held) return `none held; ${fetched}`;
  return `${t.valid_until ? 'valid until ' + fmtTime(t.valid_until) : 'held (no lifetime given)'}; ${fetched}`;
}

// A schedule's rule in words: "cron 0 9 * * 1-5 (Europe/Berlin)" or "every 5m".
function ruleText(rule) {
  if (rule && rule.cron) return `cron ${rule.cron.expr} (${rule.cron.timezone})`;
  if (rule && rule.every) return `every ${rule.every.interval}`;
  return '';
}

async function schedules(main, params) {
  const data = await api('GET', '/v1/schedules?' + pageQuery(params));
  const toggle = async (id, paused) => {
    const verb = paused ? 'resume' : 'pause';
    const question = paused
      ? `Resume schedule ${id}? It goes on from its next occurrence; those that fell while paused are not run.`
      : `Pause schedule ${id}? None of its occurrences is enqueued until it is resumed.`;
    if (!await confirmAction(question, paused ? 'Resume' : 'Pause')) return;
    try {
      await api('POST', `/v1/schedules/${encodeURIComponent(id)}/${verb}`);
      toast(`schedule ${id} ${paused ? 'resumed' : 'paused'}`);
      render();
    } catch (e) { toast(e.message); }
  };
  put(main,
    el('h1', {}, 'Schedules'),
    data.schedules.length === 0
      ? el('p', { class: 'muted' }, 'No schedule. Create one with POST /v1/schedules, redial schedules create, or [[schedules]] in the configuration file.')
      : table(['Schedule', 'Rule', 'Job', 'Next', 'Last occurrence', 'Missed', 'Source', 'State'],
        data.schedules.map(s => el('tr', { 'data-schedule': s.id },
          el('th', { scope: 'row' }, s.id),
          el('td', {}, ruleText(s.rule)),
          el('td', {}, `${s.job.request.method} ${s.job.request.url}`, el('span', { class: 'muted' }, ` (queue ${s.job.queue})`)),
          el('td', {}, s.next_at ? fmtTime(s.next_at) : 'none'),
          el('td', {}, s.last_occurrence ? fmtTime(s.last_occurrence) : el('span', { class: 'muted' }, 'none yet')),
          el('td', {}, s.missed.policy === 'run_all' ? `run_all (${s.missed.max})` : s.missed.policy),
          el('td', {}, s.source),
          el('td', { class: s.paused ? 'warn' : 'muted' }, s.paused ? 'paused' : 'on',
            state.readOnly ? null : [' ', el('button', {
              type: 'button', class: s.paused ? null : 'danger', onclick: () => toggle(s.id, s.paused),
            }, s.paused ? 'Resume' : 'Pause')]))),
        'Each occurrence becomes a job named <schedule>@<instant>.'),
    nextPage('#/schedules', data),
  );
}

// ---- routing, refresh, sign-in -----------------------------------------------------------------

async function render() {
  if (state.busy) { state.again = true; return; }
  state.busy = true;
  state.again = false;
  const hash = location.hash || '#/';
  const path = hash.split('?')[0];
  const params = query(hash);
  const page = path.startsWith('#/job/') ? 'jobs' : path.startsWith('#/endpoint/') ? 'endpoints'
    : path.startsWith('#/groups/') || path.startsWith('#/ordering/') ? 'overview' : (path.slice(2) || 'overview');
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const main = el('main', { id: 'main', tabindex: '-1' });
  try {
    if (path.startsWith('#/job/')) await job(main, decodeURIComponent(path.slice(6)), params);
    else if (path === '#/triage') await triage(main, params);
    else if (path === '#/jobs') await jobs(main, params);
    else if (path === '#/endpoints') await endpoints(main, params);
    else if (path === '#/schedules') await schedules(main, params);
    else if (path.startsWith('#/endpoint/')) await endpoint(main, decodeURIComponent(path.slice(11)));
    else if (path.startsWith('#/groups/')) await groups(main, decodeURIComponent(path.slice(9)));
    else if (path.startsWith('#/ordering/')) await ordering(main, decodeURIComponent(path.slice(11)), params);
    else await overview(main);
    byId('main').replaceWith(main);
    byId('login').hidden = true;
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) {
      put(main, el('p', { class: 'error', role: 'alert' }, e.message));
      byId('main').replaceWith(main);
    }
  } finally {
    state.busy = false;
    if (state.again) render();
  }
}

// Draws the page again unless someone is in the middle of something: a dialog open, a field
// with focus or a replay's changes being written (a redraw would throw away what is typed), or
// signing in.
function refresh() {
  const typing = document.activeElement && ['INPUT', 'SELECT', 'TEXTAREA'].includes(document.activeElement.tagName);
  const editing = document.querySelector('details.editor[open]');
  if (!byId('confirm').open && !byId('pause').open && !typing && !editing && byId('login').hidden) render();
}

function schedule() {
  clearInterval(state.timer);
  state.timer = null;
  const status = byId('live-status');
  if (state.paused) {
    status.textContent = 'Paused';
    byId('live-toggle').textContent = 'Resume';
    return;
  }
  status.textContent = state.live ? 'Live' : `Refreshes every ${REFRESH_MS / 1000} s`;
  byId('live-toggle').textContent = 'Pause';
  state.timer = setInterval(refresh, state.live ? LIVE_REFRESH_MS : REFRESH_MS);
}

// The event stream (GET /v1/events/stream, read with fetch so that the token goes in the
// Authorization header): each event draws the page again. When it drops, the page goes back to
// refreshing every 5 s and the stream is tried again after that, from the last event seen.
async function live() {
  if (state.liveAbort) return;
  const abort = new AbortController();
  state.liveAbort = abort;
  const headers = { Accept: 'text/event-stream' };
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  if (state.lastEvent) headers['Last-Event-ID'] = state.lastEvent;
  try {
    const resp = await fetch('/v1/events/stream', { headers, credentials: 'omit', signal: abort.signal });
    if (!resp.ok || !resp.body) throw new Error(`event stream: ${resp.status}`);
    state.live = true;
    schedule();
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
        let id = null;
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith('id:')) id = line.slice(3).trim();
        }
        if (id === null) continue; // a keepalive
        state.lastEvent = id;
        if (!state.paused && !state.liveRedraw) {
          state.liveRedraw = setTimeout(() => { state.liveRedraw = null; refresh(); }, LIVE_GATHER_MS);
        }
      }
    }
  } catch (_) {
    // Dropped, refused or never up: the refresh takes over.
  } finally {
    state.liveAbort = null;
    const was = state.live;
    state.live = false;
    schedule();
    if (was) refresh();
    if (!abort.signal.aborted) setTimeout(live, REFRESH_MS);
  }
}

function showLogin(message) {
  byId('login').hidden = false;
  byId('main').replaceChildren();
  byId('login-error').textContent = state.token ? (message || 'That token was refused.') : '';
  byId('token').focus();
}

async function session() {
  try {
    const s = await api('GET', '/v1/session');
    state.readOnly = !!s.read_only;
    byId('sign-out').hidden = !state.token;
    document.body.classList.toggle('read-only', state.readOnly);
    return true;
  } catch (_) {
    return false;
  }
}

window.addEventListener('DOMContentLoaded', async () => {
  byId('login-form').addEventListener('submit', async e => {
    e.preventDefault();
    state.token = byId('token').value.trim();
    sessionStorage.setItem('redial-token', state.token);
    if (await session()) { render(); live(); }
  });
  byId('sign-out').addEventListener('click', () => {
    if (state.liveAbort) state.liveAbort.abort();
    sessionStorage.removeItem('redial-token');
    state.token = '';
    location.reload();
  });
  byId('live-toggle').addEventListener('click', () => { state.paused = !state.paused; schedule(); });
  window.addEventListener('hashchange', render);
  if (await session()) { render(); live(); }
  schedule();
});
