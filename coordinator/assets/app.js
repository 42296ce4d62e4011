// The Switchyard operator dashboard: polls the coordinator's cluster health and calls its
// cluster-wide actions. No framework and no external assets: the coordinator serves this file
// from its binary, and the page must work offline.
'use strict';

const KEY_STORAGE = 'switchyard.coordinator.managementKey';
const POLL_MS = 2000;
let lastDoc = null;
let lastFetch = 0;
let pollTimer = null;

const $ = (sel) => document.querySelector(sel);

function key() { return sessionStorage.getItem(KEY_STORAGE) || ''; }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function duration(ms) {
  if (!ms || ms <= 0) return '-';
  if (ms < 1000) return ms + ' ms';
  if (ms < 120000) return (ms / 1000).toFixed(1) + ' s';
  return Math.round(ms / 60000) + ' min';
}

/// Remaining time now, from a document read `lastFetch` ago.
function remaining(ms) { return Math.max(0, (ms || 0) - (Date.now() - lastFetch)); }

function toast(text) {
  const t = $('#toast');
  t.textContent = text;
  t.classList.remove('hidden');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.add('hidden'), 5000);
}

function askForKey(message) {
  $('#key-form').classList.remove('hidden');
  $('#key-forget').classList.add('hidden');
  if (message) toast(message);
}

async function api(method, path, body) {
  const headers = { 'authorization': 'Bearer ' + key() };
  const init = { method, headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  let json = null;
  try { json = await resp.json(); } catch (_) { json = null; }
  if (resp.status === 401 || resp.status === 403) {
    askForKey(json && json.error ? json.error.message : 'The management key was refused');
  }
  if (!resp.ok) {
    const msg = json && json.error ? `${json.error.code}: ${json.error.message}` : `HTTP ${resp.status}`;
    throw new Error(msg);
  }
  return json;
}

function pill(state) {
  return el('span', { class: 'pill state-' + state, 'data-state': state }, state);
}

function button(label, action, id, extra) {
  return el('button', { type: 'button', 'data-action': action, 'data-id': id, 'data-extra': extra }, label);
}

function fill(table, rows, empty) {
  const body = $(table + ' tbody');
  body.replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { class: 'empty', colSpan: 7 }, empty))]));
}

function render(doc) {
  const status = $('#cluster-status');
  status.textContent = doc.status;
  status.className = 'badge ' + doc.status;
  const co = doc.coordinator || {};
  $('#meta').textContent = `redis ${doc.redis.state}` +
    (doc.redis.latencyMs != null ? ` ${doc.redis.latencyMs} ms` : '') +
    (co.leaderId ? ` · leader ${co.leaderId} (gen ${co.leaderGeneration})` : ' · no leader');
  $('#coordinator').textContent = `${co.id}${co.leader ? ' (leader)' : ''}`;
  $('#reasons').replaceChildren(...(doc.reasons || []).map((r) => el('li', { 'data-code': r.code }, `${r.code}: ${r.message}`)));

  fill('#nodes', (doc.nodes || []).map((n) => el('tr', { 'data-node': n.id },
    el('td', {}, n.id), el('td', {}, pill(n.state)), el('td', {}, n.version || '-'),
    el('td', {}, n.heartbeat ? duration(n.lastHeartbeatAgeMs) + ' ago' : 'gone'),
    el('td', {}, n.inflight ?? '-'), el('td', {}, n.address || '-'), el('td', {}, n.redisState || '-'))), 'No node has registered');
  $('#nodes-count').textContent = doc.summary && doc.summary.nodes
    ? `${doc.summary.nodes.up} up · ${doc.summary.nodes.stale} stale · ${doc.summary.nodes.down} down` : '';

  fill('#providers', (doc.providers || []).map((p) => {
    const b = p.breaker;
    const transitions = (p.lastTransitions || []).slice(0, 3)
      .map((t) => `${t.from}→${t.to} ${new Date(t.atMs).toLocaleTimeString()}`).join(', ');
    return el('tr', { 'data-provider': p.id },
      el('td', {}, p.id), el('td', { class: 'breaker' }, pill(b.state)),
      el('td', { class: 'countdown', 'data-ms': b.retryAfterMs }, duration(remaining(b.retryAfterMs))),
      el('td', {}, b.generation),
      el('td', {}, `${p.connections.total} (${p.connections.cooling} cooling, ${p.connections.terminal} terminal)`),
      el('td', { class: 'muted' }, transitions || '-'),
      el('td', {}, button('Reset', 'reset-provider', p.id)));
  }), 'No providers configured');

  const conns = doc.connections || [];
  fill('#connections', conns.map((c) => {
    const locks = (c.lockouts || []).map((l) => `${l.model} (${duration(l.remainingMs)})`).join(', ');
    const actions = el('td', {});
    if (c.status === 'terminal') actions.append(button('Reinstate', 'reinstate', c.id));
    else actions.append(button('Clear cooldown', 'clear-cooldown', c.id));
    if ((c.lockouts || []).length) actions.append(' ', button('Clear lockouts', 'clear-lockouts', c.id, c.provider));
    return el('tr', { 'data-connection': c.id },
      el('td', {}, c.id), el('td', {}, c.provider),
      el('td', {}, pill(c.terminal ? 'terminal' : c.status), c.terminal ? ' ' + c.terminal : ''),
      el('td', { class: 'countdown', 'data-ms': c.remainingMs }, duration(remaining(c.remainingMs))),
      el('td', {}, c.backoffLevel), el('td', {}, locks || '-'), actions);
  }), 'Every connection is active');
  const sc = doc.summary && doc.summary.connections;
  $('#conns-count').textContent = sc ? `${sc.cooling} cooling · ${sc.terminal} terminal · ${sc.withLockouts} with lockouts of ${sc.total}` : '';

  fill('#leases', (doc.leases || []).map((l) => el('tr', { 'data-lease': l.connection },
    el('td', {}, l.connection), el('td', {}, l.ownerHashPrefix), el('td', {}, l.apiKeyId || '-'),
    el('td', {}, l.generation),
    el('td', { class: 'countdown', 'data-ms': l.remainingMs }, duration(remaining(l.remainingMs))),
    el('td', {}, button('Revoke', 'revoke-lease', l.connection)))), 'No session leases');

  $('#settings-version').textContent = doc.settingsVersion != null ? `version ${doc.settingsVersion}` : '';
  $('#events').replaceChildren(...(doc.recentEvents || []).map((e) =>
    el('li', {}, `${new Date(e.receivedAtMs).toLocaleTimeString()} ${e.summary} (${e.origin})`)));
}

// === charts: inline SVG, one small chart per provider and series ===

const SVG_NS = 'http://www.w3.org/2000/svg';
const CHART_W = 360;
const CHART_H = 64;
const SERIES = [
  { key: 'requestsPerSec', name: 'requests', label: 'requests/s', unit: '/s' },
  { key: 'errorsPerSec', name: 'errors', label: 'errors/s', unit: '/s' },
  { key: 'p95Ms', name: 'p95', label: 'p95 latency', unit: ' ms' },
];

function svg(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

function number(v) {
  if (v >= 100) return Math.round(v).toString();
  if (v >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/// One series as a polyline over the span (time on x, 0..max on y).
function chart(provider, series, points, from, span) {
  const values = points.map((p) => p[series.key]).filter((v) => v !== null && v !== undefined);
  const max = Math.max(0, ...values);
  const top = max > 0 ? max * 1.1 : 1;
  const g = svg('svg', {
    viewBox: `0 0 ${CHART_W} ${CHART_H}`, width: CHART_W, height: CHART_H,
    class: `chart series-${series.name}`, role: 'img',
    'data-provider': provider, 'data-series': series.name, 'data-points': values.length,
    'aria-label': `${provider} ${series.label}`,
  });
  g.append(svg('rect', { x: 0, y: 0, width: CHART_W, height: CHART_H, class: 'frame' }));
  const coords = points
    .filter((p) => p[series.key] !== null && p[series.key] !== undefined)
    .map((p) => {
      const x = ((p.at - from) / span) * CHART_W;
      const y = CHART_H - 2 - (p[series.key] / top) * (CHART_H - 14);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
  if (coords.length > 0) g.append(svg('polyline', { points: coords.join(' '), class: 'line' }));
  const last = values.length ? values[values.length - 1] : null;
  const caption = svg('text', { x: 4, y: 11, class: 'caption' });
  caption.textContent = `${series.label}: ${last === null ? '-' : number(last) + series.unit}` +
    (max > 0 ? ` (max ${number(max)})` : '');
  g.append(caption);
  return g;
}

function renderHistory(h) {
  const box = $('#charts');
  if (!h || !Array.isArray(h.providers)) return;
  // The x axis spans the window, or less while the history is younger than the window, so a
  // fresh coordinator's first minutes are not a sliver at the right edge.
  const firsts = h.providers.filter((p) => p.points.length > 0).map((p) => p.points[0].at);
  const oldest = firsts.length ? Math.min(...firsts) - h.stepMs : h.generatedAt - h.windowMs;
  const from = Math.max(h.generatedAt - h.windowMs, oldest);
  const span = Math.max(1, h.generatedAt - from);
  $('#history-step').textContent = `last ${duration(span)}, one point every ${duration(h.stepMs)}`;
  box.replaceChildren(...h.providers.map((p) => {
    const row = el('div', { class: 'chart-row', 'data-provider': p.id }, el('strong', {}, p.id));
    for (const s of SERIES) row.append(chart(p.id, s, p.points, from, span));
    return row;
  }));
}

/// Ticks the countdowns between polls.
function tick() {
  for (const cell of document.querySelectorAll('td.countdown')) {
    cell.textContent = duration(remaining(Number(cell.dataset.ms)));
  }
}

async function poll() {
  clearTimeout(pollTimer);
  if (key()) {
    try {
      const doc = await api('GET', '/api/cluster/health');
      lastDoc = doc;
      lastFetch = Date.now();
      render(doc);
      document.body.dataset.generatedAt = String(doc.generatedAt);
      // The charts are a best effort: a failed history read leaves the last ones shown.
      api('GET', '/api/cluster/history').then(renderHistory, () => {});
    } catch (e) {
      $('#cluster-status').textContent = 'unreachable';
      $('#cluster-status').className = 'badge down';
    }
  } else {
    askForKey();
  }
  pollTimer = setTimeout(poll, POLL_MS);
}

const ACTIONS = {
  'reset-provider': (id) => api('POST', `/api/cluster/providers/${encodeURIComponent(id)}/reset`),
  'reset-all': () => api('POST', '/api/cluster/reset'),
  'clear-cooldown': (id) => api('POST', '/api/cluster/cooldowns', { connectionIds: [id] }),
  'clear-all': () => api('POST', '/api/cluster/cooldowns', { all: true }),
  'reinstate': (id) => api('POST', `/api/cluster/connections/${encodeURIComponent(id)}/reinstate`),
  'clear-lockouts': (id, provider) => api('DELETE', '/api/cluster/model-cooldowns', { provider, connection: id }),
  'revoke-lease': (id) => api('DELETE', `/api/cluster/leases/${encodeURIComponent(id)}`),
  'patch-settings': () => api('PATCH', '/api/cluster/settings', $('#settings-patch').value),
};

function summarize(action, result) {
  if (!result) return action + ': done';
  if (result.message) return result.message;
  if (action === 'patch-settings') return `Settings version ${result.version}: ${(result.changed || []).join(', ')}`;
  if ('cleared' in result) return `Cleared ${result.cleared}, unchanged ${result.unchanged}, skipped terminal ${result.skippedTerminal}`;
  if ('removed' in result) return `Removed ${result.removed} lockout(s)`;
  if ('reinstated' in result) return result.reinstated ? `Reinstated ${result.connectionId}` : `${result.connectionId} was not terminal`;
  if ('revoked' in result) return result.revoked ? `Revoked the lease on ${result.connectionId}` : 'No lease to revoke';
  return action + ': done';
}

document.addEventListener('click', async (ev) => {
  const b = ev.target.closest('button[data-action]');
  if (!b) return;
  const action = b.dataset.action;
  const fn = ACTIONS[action];
  if (!fn) return;
  b.disabled = true;
  try {
    const result = await fn(b.dataset.id, b.dataset.extra);
    toast(summarize(action, result));
  } catch (e) {
    toast(`${action} failed: ${e.message}`);
  } finally {
    b.disabled = false;
    poll();
  }
});

document.addEventListener('DOMContentLoaded', () => {
  $('#key-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const value = $('#key').value.trim();
    if (!value) return;
    sessionStorage.setItem(KEY_STORAGE, value);
    $('#key').value = '';
    $('#key-form').classList.add('hidden');
    $('#key-forget').classList.remove('hidden');
    poll();
  });
  $('#key-forget').addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORAGE);
    askForKey('Key forgotten');
  });
  if (key()) $('#key-forget').classList.remove('hidden');
  setInterval(tick, 250);
  poll();
});
