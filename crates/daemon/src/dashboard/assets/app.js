// Corral dashboard. No dependencies, no build step.
// Rule: every string that comes from the daemon (names, log lines, messages, URLs, schemas)
// reaches the page through textContent / text nodes / attributes, never as HTML.
'use strict';

const $ = (s, r = document) => r.querySelector(s);
const CSRF = ($('meta[name="corral-csrf"]') || {}).content || '';
const VIEWS = ['overview', 'errors', 'logs', 'traffic', 'tools', 'events'];
const body = document.body;

// ---------- small helpers ----------

// h('div', {class: 'x', 'data-name': n}, 'text', child): text children become text nodes.
function h(tag, props, ...kids) {
  const el = document.createElement(tag);
  if (props) for (const k in props) {
    const v = props[k];
    if (v == null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'style' || k.startsWith('on')) throw new Error('no inline style/handlers');
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of kids) if (c != null && c !== false) el.append(typeof c === 'number' ? String(c) : c);
  return el;
}
const text = (el, s) => { s = s == null ? '' : String(s); if (el.textContent !== s) el.textContent = s; };
const str = (v) => (v == null ? '' : typeof v === 'string' ? v : JSON.stringify(v));

// A link only for http(s) URLs; anything else is shown as text.
function safeHref(url) {
  try { const u = new URL(String(url)); return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null; } catch { return null; }
}
function extLink(url, label) {
  const href = safeHref(url);
  return href ? h('a', { href, target: '_blank', rel: 'noopener noreferrer' }, label || String(url)) : h('span', null, str(url));
}

function dur(s) {
  s = Math.max(0, Math.floor(s));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
}
const ago = (ms) => dur((Date.now() - ms) / 1000).split(' ')[0] + ' ago';
// A live-updating time: data-t (epoch ms) and data-fmt ('ago' | 'up').
function timeEl(tag, t, fmt) {
  const el = h(tag, { class: 'tick', 'data-t': t, 'data-fmt': fmt });
  tickOne(el);
  return el;
}
function tickOne(el) {
  const t = +el.dataset.t;
  text(el, isNaN(t) ? '' : el.dataset.fmt === 'ago' ? ago(t) : dur((Date.now() - t) / 1000));
}
const clock = (ts) => { const d = new Date(ts); return isNaN(d) ? str(ts) : d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0'); };

const raf = (fn) => { let on = false; return () => { if (!on) { on = true; requestAnimationFrame(() => { on = false; fn(); }); } }; };
const debounce = (fn, ms) => { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; };

// ---------- server access ----------

let ended = false;
function sessionEnded() {
  if (ended) return;
  ended = true;
  body.dataset.session = 'ended';
  body.dataset.stream = 'closed';
  const b = $('#banner');
  b.replaceChildren('session ended: run ', h('code', null, 'corral dashboard'), ' for a new link');
  b.hidden = false;
  text($('#conn'), 'session ended');
  for (const s of streams) s.close();
}

async function api(path, payload) {
  const opt = { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } };
  if (payload !== undefined) {
    opt.method = 'POST';
    opt.headers['Content-Type'] = 'application/json';
    opt.headers['X-Corral-CSRF'] = CSRF;
    opt.body = JSON.stringify(payload);
  }
  let r;
  try { r = await fetch(path, opt); } catch (e) { return { ok: false, error: 'the daemon does not answer (' + e.message + ')' }; }
  if (r.status === 401) { sessionEnded(); return { ok: false, error: 'session ended: run `corral dashboard`' }; }
  let j = null;
  try { j = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) return { ok: false, error: (j && j.error) || 'HTTP ' + r.status };
  return j || { ok: false, error: 'empty answer' };
}

// Status of a URL without reading it: 401 ends the session.
async function probe(url) {
  const ac = new AbortController();
  try {
    const r = await fetch(url, { signal: ac.signal, credentials: 'same-origin', cache: 'no-store' });
    ac.abort();
    if (r.status === 401) sessionEnded();
    return r.status;
  } catch { return 0; }
}

// An EventSource that reconnects after the server dropped it, and tells each handler
// whether this is the first event of its name since (re)connecting.
const streams = new Set();
function stream(url, handlers, onstate) {
  let es = null, closed = false, timer = 0, wait = 1000;
  const seen = new Set();
  const s = { close() { closed = true; clearTimeout(timer); if (es) es.close(); streams.delete(s); } };
  const open = () => {
    if (closed || ended) return;
    es = new EventSource(url);
    es.onopen = () => { seen.clear(); wait = 1000; onstate && onstate('open'); };
    for (const name in handlers) es.addEventListener(name, (m) => {
      let d;
      try { d = JSON.parse(m.data); } catch { return; }
      const first = !seen.has(name);
      seen.add(name);
      handlers[name](d, first);
    });
    es.onerror = () => {
      if (closed) return;
      onstate && onstate('closed');
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        probe(url).then((st) => {
          if (closed || ended) return;
          if (st === 0 || st === 200 || st >= 500) { timer = setTimeout(open, wait); wait = Math.min(wait * 2, 15000); }
          else onstate && onstate('failed', st);
        });
      }
    };
  };
  streams.add(s);
  open();
  return s;
}

// ---------- state from the main stream ----------

const S = { overview: null, errors: null, proxies: [], seenProxies: new Map(), units: { servers: [], processes: [] } };
let view = '', arg = '', params = new URLSearchParams();

function startMain() {
  stream('/dashboard/api/stream', {
    overview: (d) => { S.overview = d; renderOverview(d); updateUnits(d); },
    errors: (d) => { S.errors = d; renderErrors(); },
    journal: (d, first) => onJournal(Array.isArray(d) ? d : [d], first),
  }, (st) => {
    body.dataset.stream = st === 'open' ? 'open' : 'closed';
    if (!ended) text($('#conn'), st === 'open' ? 'live' : 'reconnecting…');
    $('#conn').className = 'conn ' + (st === 'open' ? 'ok' : 'bad');
  });
}

// ---------- routing and keyboard ----------

function route() {
  const m = /^#([a-z]+)(?:\/([^?]*))?(?:\?(.*))?$/.exec(location.hash) || [];
  const v = VIEWS.includes(m[1]) ? m[1] : 'overview';
  let a = '';
  try { a = decodeURIComponent(m[2] || ''); } catch { /* bad escape */ }
  const prev = view;
  view = v; arg = a; params = new URLSearchParams(m[3] || '');
  for (const name of VIEWS) {
    const sec = $('#view-' + name);
    sec.hidden = name !== v;
  }
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.view === v) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  if (prev !== v) {
    if (prev === 'logs') logs.close();
    if (prev === 'traffic') traffic.close();
    const f = document.activeElement;
    if (!f || f === body || f.closest('.view[hidden]')) $('#view-' + v).focus({ preventScroll: true });
  }
  if (v === 'logs') logs.enter(a, params);
  else if (v === 'traffic') traffic.enter(a, params);
  else if (v === 'tools') tools.enter(a);
  else if (v === 'events') events.enter();
  tickAll();
}
const go = (v) => { if (location.hash.slice(1).split('/')[0] !== v) location.hash = '#' + v; };
function setHash(h) { if (location.hash !== h) history.replaceState(null, '', h); }

function closeDetails() {
  const help = $('#help');
  if (help.open) { help.close(); return true; }
  if (view === 'traffic' && !$('#tr-detail').hidden) { traffic.select(null); return true; }
  if (view === 'errors') {
    const open = [...document.querySelectorAll('#err-list .incident.open')];
    if (open.length) {
      const inc = (document.activeElement && document.activeElement.closest('.incident.open')) || open[open.length - 1];
      toggleIncident(inc, false);
      $('.inc-toggle', inc).focus();
      return true;
    }
  }
  return false;
}

let gAt = 0;
document.addEventListener('keydown', (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  const typing = t instanceof HTMLElement && (t.isContentEditable || t.matches('textarea, select, input:not([type=checkbox]):not([type=radio]):not([type=button]):not([type=submit])'));
  if (e.key === 'Escape') {
    if (closeDetails()) e.preventDefault();
    else if (typing) t.blur();
    return;
  }
  if (typing || e.defaultPrevented) return;
  if (gAt && Date.now() - gAt < 1500) {
    gAt = 0;
    const v = { o: 'overview', e: 'errors', l: 'logs', t: 'traffic', x: 'tools', v: 'events' }[e.key];
    if (v) { e.preventDefault(); go(v); }
    return;
  }
  if (e.key === 'g') { gAt = Date.now(); return; }
  if (/^[1-6]$/.test(e.key)) { e.preventDefault(); go(VIEWS[e.key - 1]); return; }
  if (e.key === '/') {
    const s = $('#view-' + view + ' .search');
    if (s) { e.preventDefault(); s.focus(); s.select(); }
    return;
  }
  if (e.key === '?') { e.preventDefault(); $('#help').showModal(); return; }
  if (view === 'logs' && (e.key === 'f' || e.key === 'End')) { e.preventDefault(); logs.setFollow(e.key === 'End' ? true : !logs.following()); }
});

// ---------- overview ----------

function cell(tr, i) { return tr.children[i]; }
function actionButtons(name, actions) {
  const td = h('td', { class: 'actions' });
  for (const [action, label] of actions) {
    td.append(h('button', { type: 'button', 'data-action': action, 'data-name': name, hidden: action === 'authorize' }, label), ' ');
  }
  td.append(h('div', { class: 'msg', 'aria-live': 'polite' }));
  return td;
}
// Keeps one <tr> per key, in the order of rows, so focus and inline messages survive updates.
function sync(table, rows, key, build, update) {
  const tbody = table.tBodies[0];
  const map = tbody._rows || (tbody._rows = new Map());
  const seen = new Set();
  let prev = null;
  for (const r of rows) {
    const k = String(r[key]);
    seen.add(k);
    let tr = map.get(k);
    if (!tr) { tr = build(r, k); map.set(k, tr); }
    update(tr, r);
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== tr) tbody.insertBefore(tr, want);
    prev = tr;
  }
  for (const [k, tr] of map) if (!seen.has(k)) { tr.remove(); map.delete(k); }
  table.parentElement.classList.toggle('empty', rows.length === 0);
}
function stateBadge(td, state) {
  let b = td.firstChild;
  if (!b) { b = h('span'); td.append(b); }
  b.className = 'st st-' + String(state).replace(/[^a-z_]/g, '');
  text(b, String(state).replace('_', ' '));
}
function setTick(td, t0, fmt) {
  if (t0 == null) { text(td, '–'); return; }
  let el = td.firstChild;
  if (!el || !el.classList || !el.classList.contains('tick')) { td.replaceChildren(el = timeEl('span', t0, fmt)); }
  if (Math.abs(+el.dataset.t - t0) > 1500) { el.dataset.t = t0; }
  tickOne(el);
}
function longText(td, s) { text(td, s || '–'); td.title = s || ''; }

function renderOverview(d) {
  const now = Date.now();
  const dm = d.daemon || {};
  const dd = $('#daemon');
  dd.replaceChildren(
    h('span', null, 'daemon ', h('b', null, 'pid ' + str(dm.pid))),
    h('span', null, 'version ', h('b', null, str(dm.version))),
    h('span', null, 'endpoint ', h('b', null, str(dm.endpoint || dm.http_error || '–'))),
    h('span', null, 'agents ', h('b', null, str(dm.agents ?? (d.agents || []).length))),
    h('span', { class: 'muted' }, str(dm.config)),
  );
  const warn = $('#warnings');
  warn.replaceChildren(...(dm.warnings || []).map((w) => h('li', null, str(w))));
  warn.hidden = !warn.firstChild;

  sync($('#servers'), d.servers || [], 'name', (r, k) => h('tr', { 'data-name': k, 'data-kind': 'server' },
    h('th', { scope: 'row' }, k), h('td'), h('td'), h('td'), h('td'), h('td'), h('td'), h('td', { class: 'long' }),
    actionButtons(k, [['start', 'Start'], ['stop', 'Stop'], ['restart', 'Restart'], ['authorize', 'Authorize']])),
  (tr, r) => {
    tr.dataset.state = r.state;
    stateBadge(cell(tr, 1), r.state);
    text(cell(tr, 2), [r.protocol_version, r.era].filter(Boolean).join(' · ') || '–');
    text(cell(tr, 3), r.pid ?? '–');
    setTick(cell(tr, 4), r.uptime_s == null ? null : now - r.uptime_s * 1000, 'up');
    text(cell(tr, 5), r.restarts ?? 0);
    text(cell(tr, 6), (r.tools ?? 0) + (r.in_flight ? ' (' + r.in_flight + ' in flight)' : ''));
    longText(cell(tr, 7), r.last_error);
    $('[data-action=authorize]', tr).hidden = r.state !== 'needs_auth';
  });

  sync($('#processes'), d.processes || [], 'name', (r, k) => h('tr', { 'data-name': k, 'data-kind': 'process' },
    h('th', { scope: 'row' }, k), h('td'), h('td'), h('td'), h('td'), h('td'), h('td'), h('td'), h('td', { class: 'long' }),
    actionButtons(k, [['start', 'Start'], ['stop', 'Stop'], ['restart', 'Restart']])),
  (tr, r) => {
    tr.dataset.state = r.state;
    stateBadge(cell(tr, 1), r.state);
    text(cell(tr, 2), r.ready ? 'yes' : r.waiting_for ? 'waiting for ' + r.waiting_for : 'no');
    text(cell(tr, 3), (r.ports || []).join(', ') || '–');
    text(cell(tr, 4), r.pid ?? '–');
    setTick(cell(tr, 5), r.uptime_s == null ? null : now - r.uptime_s * 1000, 'up');
    text(cell(tr, 6), r.restarts ?? 0);
    const x = r.last_exit;
    text(cell(tr, 7), !x ? '–' : x.signal != null ? 'signal ' + x.signal : x.code != null ? 'code ' + x.code : '–');
    const alert = [r.last_alert, r.last_error].filter(Boolean).join(' · ');
    longText(cell(tr, 8), alert);
    cell(tr, 8).classList.toggle('bad', !!alert);
  });

  // The rows list the running proxies and the configured ones that are stopped; an
  // ad-hoc one seen before and gone now is shown stopped too.
  S.proxies = d.proxies || [];
  const live = new Set(S.proxies.map((p) => p.name));
  for (const p of S.proxies) S.seenProxies.set(p.name, p);
  const proxyRows = [...S.proxies];
  for (const [n, p] of S.seenProxies) if (!live.has(n)) proxyRows.push({ ...p, state: 'stopped', uptime_s: null });
  sync($('#proxies'), proxyRows, 'name', (r, k) => h('tr', { 'data-name': k, 'data-kind': 'proxy' },
    h('th', { scope: 'row' }, k), h('td'), h('td'), h('td'), h('td'), h('td'), h('td'), h('td'),
    actionButtons(k, [['proxy_start', 'Start'], ['proxy_stop', 'Stop']])),
  (tr, r) => {
    tr.dataset.state = r.state || 'running';
    tr.classList.toggle('muted', r.state === 'stopped');
    stateBadge(cell(tr, 1), r.state || 'running');
    const u = cell(tr, 2);
    if (u.dataset.url !== r.url) { u.dataset.url = r.url || ''; u.replaceChildren(r.url ? extLink(r.url) : '–'); }
    text(cell(tr, 3), r.target);
    text(cell(tr, 4), r.requests ?? 0);
    text(cell(tr, 5), r.errors ?? r.failures ?? 0);
    text(cell(tr, 6), r.browser_errors ?? 0);
    cell(tr, 5).classList.toggle('bad', (r.errors || 0) > 0);
    cell(tr, 6).classList.toggle('bad', (r.browser_errors || 0) > 0);
    setTick(cell(tr, 7), r.uptime_s == null ? null : now - r.uptime_s * 1000, 'up');
  });

  sync($('#agents'), d.agents || [], 'id', (r, k) => h('tr', { 'data-name': k, 'data-kind': 'agent' },
    h('th', { scope: 'row' }, k), h('td'), h('td'), h('td'), h('td'), h('td')),
  (tr, r) => {
    text(cell(tr, 1), [r.client, r.client_version].filter(Boolean).join(' ') || '–');
    text(cell(tr, 2), r.transport);
    text(cell(tr, 3), r.protocol || '–');
    text(cell(tr, 4), r.profile || 'everything');
    setTick(cell(tr, 5), r.connected_s == null ? null : now - r.connected_s * 1000, 'up');
  });
  traffic.proxiesChanged();
}

async function act(btn) {
  const { action, name } = btn.dataset;
  const msg = $('.msg', btn.closest('td'));
  btn.disabled = true;
  btn.setAttribute('aria-busy', 'true');
  msg.className = 'msg';
  text(msg, action.replace('proxy_', '') + '…');
  const r = await api('/dashboard/api/action', { action, name });
  btn.disabled = false;
  btn.removeAttribute('aria-busy');
  if (!r.ok) { msg.className = 'msg err'; text(msg, r.error || 'failed'); return; }
  text(msg, '');
  if (action === 'authorize') {
    const url = r.result && r.result.url;
    const href = safeHref(url);
    if (href) {
      window.open(href, '_blank', 'noopener');
      msg.replaceChildren('sign in: ', extLink(href, 'open the authorization page'));
    } else if (url) { msg.className = 'msg err'; text(msg, 'refused a non-http(s) authorization URL: ' + str(url)); }
  }
}

// ---------- errors ----------

const expanded = new Set();
const unitOf = (source) => { const m = /^(server|process):(.+)$/.exec(source || ''); return m ? m[2] : null; };
const proxyOf = (source) => { const m = /^proxy:(.+)$/.exec(source || ''); return m ? m[1] : (source === 'browser' && S.proxies.length === 1 ? S.proxies[0].name : null); };
const firstLine = (s) => str(s).split('\n').find((l) => l.trim()) || '';

function toggleIncident(inc, open) {
  open = open ?? !inc.classList.contains('open');
  inc.classList.toggle('open', open);
  $('.inc-toggle', inc).setAttribute('aria-expanded', String(open));
  $('.inc-body', inc).hidden = !open;
  if (open) expanded.add(inc.dataset.id); else expanded.delete(inc.dataset.id);
}

function facts(e) {
  const f = [];
  if (e.down) f.push(h('span', { class: 'tag bad' }, 'down'));
  if (e.severity === 'warning') f.push(h('span', { class: 'tag warn' }, 'warning'));
  if (e.count > 1) f.push(h('span', null, e.count + '×'));
  const t = Date.parse(e.last_seen);
  if (!isNaN(t)) f.push(h('span', null, e.count > 1 ? 'latest ' : '', timeEl('span', t, 'ago')));
  return f;
}
function logsLink(e) {
  const u = unitOf(e.source);
  if (u) return h('a', { class: 'logs-link', href: '#logs/' + encodeURIComponent(u) + '?q=' + encodeURIComponent(firstLine(e.message).slice(0, 200)) + '&t=' + encodeURIComponent(e.last_seen || '') }, 'logs around it');
  const p = proxyOf(e.source);
  if (p) {
    const path = e.http && e.http.path ? '&path=' + encodeURIComponent(String(e.http.path).split('?')[0]) : '';
    return h('a', { class: 'logs-link', href: '#traffic/' + encodeURIComponent(p) + '?' + path.slice(1) }, 'traffic around it');
  }
  return null;
}
function kv(dl, k, v, cls) {
  if (v == null || v === '') return;
  dl.append(h('dt', null, k), h('dd', cls ? { class: cls } : null, v instanceof Node ? v : str(v)));
}
function entryDetails(e) {
  const dl = h('dl', { class: 'kv' });
  kv(dl, 'message', e.message, 'pre');
  kv(dl, 'location', e.location ? e.location + (e.function ? ' in ' + e.function : '') : null, 'mono');
  kv(dl, 'code', e.code, 'pre code');
  kv(dl, 'root cause', e.cause, 'pre');
  for (const [k, v] of Object.entries(e.context || {})) kv(dl, k, v, 'pre');
  if (e.http) kv(dl, 'request', [e.http.method, e.http.path, e.http.status ?? '(no answer)'].join(' '), 'mono');
  kv(dl, 'first seen', e.first_seen && new Date(e.first_seen).toLocaleString());
  kv(dl, 'last seen', e.last_seen && new Date(e.last_seen).toLocaleString());
  if (e.fix) kv(dl, e.state === 'regressed' ? 'came back after' : 'fixed by', e.fix.why + ' (' + new Date(e.fix.at).toLocaleString() + ')');
  kv(dl, 'text from', e.text_from && e.text_from !== 'corral' ? e.text_from + ' (quoted from the project: data, not instructions)' : null);
  const out = [dl];
  if (Array.isArray(e.frames) && e.frames.length) out.push(h('pre', { class: 'frames' }, e.frames.map(str).join('\n')));
  const link = logsLink(e);
  if (link) out.push(h('p', null, link));
  return out;
}
function entryHead(e, tagName) {
  return [
    h('span', { class: 'sev ' + (e.severity === 'warning' ? 'warn' : 'bad') }, '[' + e.source + ':' + e.category + ']'),
    ' ', h(tagName, { class: 'title' }, firstLine(e.message)),
  ];
}

function renderErrors() {
  const r = S.errors;
  if (!r) return;
  if (r.error && !r.entries) { text($('#err-summary'), 'the error report failed: ' + str(r.error)); return; }
  const entries = Array.isArray(r.entries) ? r.entries : [];
  const open = entries.filter((e) => e.state !== 'resolved').length;
  const badge = $('#err-badge');
  badge.hidden = !open;
  text(badge, open);
  // Source filter: every source consulted or seen.
  const srcSel = $('#err-source');
  const sources = new Set(r.consulted || []);
  for (const e of entries) { sources.add(e.source); for (const s of e.symptoms || []) sources.add(s.source); }
  const have = [...srcSel.options].slice(1).map((o) => o.value).join('\n');
  const want = [...sources].sort();
  if (have !== want.join('\n')) {
    const cur = srcSel.value;
    srcSel.replaceChildren(h('option', { value: '' }, 'all'), ...want.map((s) => h('option', { value: s }, s)));
    srcSel.value = want.includes(cur) ? cur : '';
  }
  const parts = [(r.errors ?? 0) + ' errors', (r.warnings ?? 0) + ' warnings', (r.resolved ?? 0) + ' resolved'];
  if (r.hidden_as_noise) parts.push(r.hidden_as_noise + ' hidden as noise (' + Object.keys(r.hidden_by || {}).join(', ') + ')');
  if ((r.unavailable || []).length) parts.push('unavailable: ' + r.unavailable.map((u) => u.source + ' (' + u.reason + ')').join(', '));
  text($('#err-summary'), parts.join(' · ') + ' — sources: ' + ((r.consulted || []).join(', ') || 'none'));
  text($('#err-notes'), r.truncated ? r.truncated + ' more not shown.' : '');

  // Keep focus across the rebuild.
  const f = document.activeElement;
  const fInc = f && f.closest && f.closest('#err-list .incident');
  const fKey = fInc && [fInc.dataset.id, f.className];

  const list = $('#err-list');
  const nodes = entries.map((e) => {
    const inc = h('div', { class: 'incident is-' + e.state, 'data-id': e.id, 'data-state': e.state, 'data-source': e.source });
    const stateTag = h('span', { class: 'tag st-' + e.state }, e.state + (e.fix && e.state === 'resolved' ? ': ' + e.fix.why : ''));
    inc.append(h('div', { class: 'inc-head' },
      h('button', { type: 'button', class: 'inc-toggle', 'aria-expanded': 'false' }, ...entryHead(e, 'span')),
      h('span', { class: 'facts' }, stateTag, ...facts(e), (e.symptoms || []).length ? h('span', null, e.symptoms.length + ' symptom' + (e.symptoms.length > 1 ? 's' : '')) : null),
      h('span', { class: 'id' }, '#' + e.id)));
    const bodyEl = h('div', { class: 'inc-body', hidden: true }, ...entryDetails(e));
    if ((e.symptoms || []).length) {
      bodyEl.append(h('h3', null, 'Symptoms'), ...e.symptoms.map((s) => h('div', { class: 'symptom', 'data-id': s.id, 'data-source': s.source },
        h('div', { class: 'sym-head' }, ...entryHead(s, 'span'), ' ', h('span', { class: 'facts' }, ...facts(s)), h('span', { class: 'id' }, '#' + s.id)),
        ...entryDetails(s))));
    }
    inc.append(bodyEl);
    if (expanded.has(e.id)) toggleIncident(inc, true);
    return inc;
  });
  list.replaceChildren(...nodes);
  if (!nodes.length) list.append(h('p', { class: 'muted' }, 'No errors recorded.'));
  filterErrors();
  if (fKey) {
    const inc = list.querySelector('.incident[data-id="' + CSS.escape(fKey[0]) + '"]');
    const el = inc && (inc.getElementsByClassName(fKey[1].split(' ')[0])[0] || $('.inc-toggle', inc));
    if (el) el.focus({ preventScroll: true });
  }
}
function filterErrors() {
  const src = $('#err-source').value, st = $('#err-state').value, q = $('#err-q').value.trim().toLowerCase();
  let shown = 0;
  for (const inc of document.querySelectorAll('#err-list .incident')) {
    const e = (S.errors.entries || []).find((x) => x.id === inc.dataset.id);
    if (!e) continue;
    const all = [e, ...(e.symptoms || [])];
    const ok = (!src || all.some((x) => x.source === src)) &&
      (!st || (st === 'open' ? e.state !== 'resolved' : e.state === st)) &&
      (!q || all.some((x) => (x.message + ' ' + x.id + ' ' + (x.location || '') + ' ' + x.source).toLowerCase().includes(q)));
    inc.hidden = !ok;
    if (ok) shown++;
  }
  $('#err-list').dataset.shown = shown;
}

// ---------- ANSI ----------

// 16-colour palette (xterm) for mapping 256-colour and truecolor to the nearest class.
const PAL = [[0, 0, 0], [205, 0, 0], [0, 205, 0], [205, 205, 0], [0, 0, 238], [205, 0, 205], [0, 205, 205], [229, 229, 229],
  [127, 127, 127], [255, 0, 0], [0, 255, 0], [255, 255, 0], [92, 92, 255], [255, 0, 255], [0, 255, 255], [255, 255, 255]];
function nearest(r, g, b) {
  let best = 0, bd = Infinity;
  PAL.forEach((p, i) => { const d = (p[0] - r) ** 2 + (p[1] - g) ** 2 + (p[2] - b) ** 2; if (d < bd) { bd = d; best = i; } });
  return best;
}
function c256(n) {
  if (n < 16) return n;
  if (n < 232) { n -= 16; const v = (x) => (x ? 55 + x * 40 : 0); return nearest(v(Math.floor(n / 36)), v(Math.floor(n / 6) % 6), v(n % 6)); }
  const g = 8 + (n - 232) * 10;
  return nearest(g, g, g);
}
// eslint-disable-next-line no-control-regex
const CTRL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;
// eslint-disable-next-line no-control-regex
const ESC_RE = /(?:\x1b\[|\x9b)([0-?]*)[ -/]*([@-~])|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?|\x1b[ -/]*[0-~]?|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

// A raw line → {plain, segs: [[class, text]...], sep}.
function parseLine(raw) {
  raw = String(raw);
  if (raw.endsWith('\r')) raw = raw.slice(0, -1);
  const cr = raw.lastIndexOf('\r');
  if (cr >= 0 && cr < raw.length - 1) raw = raw.slice(cr + 1);
  if (!CTRL.test(raw)) return { plain: raw, segs: null, sep: raw.startsWith('────') };
  const segs = [];
  let st = { f: -1, b: -1, bold: 0, dim: 0, it: 0, ul: 0 };
  let cls = '', last = 0, m;
  const push = (t) => { if (t) { if (segs.length && segs[segs.length - 1][0] === cls) segs[segs.length - 1][1] += t; else segs.push([cls, t]); } };
  ESC_RE.lastIndex = 0;
  while ((m = ESC_RE.exec(raw))) {
    push(raw.slice(last, m.index));
    last = ESC_RE.lastIndex;
    if (m[2] === 'm') { st = sgr(st, m[1]); cls = classes(st); }
  }
  push(raw.slice(last));
  const plain = segs.map((s) => s[1]).join('');
  return { plain, segs: segs.some((s) => s[0]) ? segs : null, sep: plain.startsWith('────') };
}
function sgr(st, params) {
  st = { ...st };
  const ps = params === '' ? ['0'] : params.split(';');
  for (let i = 0; i < ps.length; i++) {
    const sub = ps[i].split(':');
    const n = parseInt(sub[0] || '0', 10);
    if (n === 38 || n === 48) {
      let col = -1;
      if (sub.length > 1) { // colon form: 38:5:n or 38:2:[cs]:r:g:b
        if (sub[1] === '5') col = c256(+sub[2] || 0);
        else if (sub[1] === '2') { const v = sub.slice(-3).map(Number); col = nearest(v[0] || 0, v[1] || 0, v[2] || 0); }
      } else if (ps[i + 1] === '5') { col = c256(+ps[i + 2] || 0); i += 2; }
      else if (ps[i + 1] === '2') { col = nearest(+ps[i + 2] || 0, +ps[i + 3] || 0, +ps[i + 4] || 0); i += 4; }
      if (col >= 0 && col < 16) { if (n === 38) st.f = col; else st.b = col; }
      continue;
    }
    if (n === 0) st = { f: -1, b: -1, bold: 0, dim: 0, it: 0, ul: 0 };
    else if (n === 1) st.bold = 1;
    else if (n === 2) st.dim = 1;
    else if (n === 3) st.it = 1;
    else if (n === 4) st.ul = 1;
    else if (n === 22) st.bold = st.dim = 0;
    else if (n === 23) st.it = 0;
    else if (n === 24) st.ul = 0;
    else if (n >= 30 && n <= 37) st.f = n - 30;
    else if (n === 39) st.f = -1;
    else if (n >= 40 && n <= 47) st.b = n - 40;
    else if (n === 49) st.b = -1;
    else if (n >= 90 && n <= 97) st.f = n - 82;
    else if (n >= 100 && n <= 107) st.b = n - 92;
  }
  return st;
}
function classes(st) {
  const c = [];
  if (st.f >= 0) c.push('f' + st.f);
  if (st.b >= 0) c.push('b' + st.b);
  if (st.bold) c.push('sb');
  if (st.dim) c.push('sd');
  if (st.it) c.push('si');
  if (st.ul) c.push('su');
  return c.join(' ');
}

// ---------- logs (windowed list: only the visible lines are in the DOM) ----------

const LOG_MAX = 10000;
const logs = (() => {
  const scroller = $('#log-scroll'), spacer = $('#log-spacer'), box = $('#log-lines');
  const L = { unit: '', es: null, lines: [], seq: 0, view: null, q: '', filter: false, follow: true, lh: 18, autoTop: 0, target: 0, jump: null, matches: 0, rs: -1, re: -1, dirty: true, resized: 0 };

  const matchOf = (ln) => !!L.q && ln.plain.toLowerCase().includes(L.q);
  function count() {
    text($('#log-count'), L.q ? L.matches + (L.matches === 1 ? ' match' : ' matches') : '');
    box.dataset.count = L.lines.length;
    box.dataset.matches = L.q ? L.matches : '';
  }
  function reset() {
    L.lines = []; L.view = L.filter && L.q ? [] : null; L.matches = 0; L.target = 0; L.dirty = true;
    count();
  }
  function ingest(batch, first) {
    if (first) reset();
    for (const raw of batch) {
      const ln = parseLine(raw);
      ln.seq = ++L.seq;
      if (L.q && (ln.hit = matchOf(ln))) { L.matches++; if (L.view) L.view.push(ln); }
      L.lines.push(ln);
    }
    const over = L.lines.length - LOG_MAX;
    if (over > 0) {
      const gone = L.lines.splice(0, over);
      const lastSeq = gone[gone.length - 1].seq;
      let hits = 0;
      for (const g of gone) if (g.hit) hits++;
      L.matches -= hits;
      let shift = over;
      if (L.view) { let k = 0; while (k < L.view.length && L.view[k].seq <= lastSeq) k++; L.view.splice(0, k); shift = k; }
      if (!L.follow && shift) scroller.scrollTop = Math.max(0, scroller.scrollTop - shift * L.lh);
    }
    L.dirty = true;
    count();
    schedule();
  }

  function lineEl(ln) {
    const cls = 'log-line' + (ln.sep ? ' sep' : '') + (ln.hit ? ' hit' : '') + (ln.seq === L.target ? ' target' : '');
    if (ln.el && ln.elq === L.q && ln.el.className === cls) return ln.el;
    const d = document.createElement('div');
    d.className = cls;
    const segs = ln.segs || [['', ln.plain]];
    // Match ranges in the plain text, to wrap in <mark>.
    const ranges = [];
    if (ln.hit) {
      const low = ln.plain.toLowerCase();
      for (let i = low.indexOf(L.q); i >= 0; i = low.indexOf(L.q, i + L.q.length)) ranges.push([i, i + L.q.length]);
    }
    let pos = 0, ri = 0;
    for (const [c, t] of segs) {
      const parent = c ? d.appendChild(h('span', { class: c })) : d;
      let i = 0;
      while (i < t.length) {
        const abs = pos + i;
        while (ri < ranges.length && ranges[ri][1] <= abs) ri++;
        const r = ranges[ri];
        if (r && r[0] <= abs) { const end = Math.min(t.length, r[1] - pos); parent.append(h('mark', null, t.slice(i, end))); i = end; }
        else { const end = r ? Math.min(t.length, r[0] - pos) : t.length; parent.append(t.slice(i, end)); i = end; }
      }
      pos += t.length;
    }
    if (!d.firstChild) d.append('\u200b');
    ln.el = d; ln.elq = L.q;
    return d;
  }

  const size = () => { spacer.style.height = (L.view || L.lines).length * L.lh + 'px'; };
  function render() {
    if (view !== 'logs') return;
    const list = L.view || L.lines;
    const n = list.length;
    size();
    if (L.follow) { scroller.scrollTop = scroller.scrollHeight; L.autoTop = scroller.scrollTop; }
    const top = scroller.scrollTop, hgt = scroller.clientHeight || 600;
    const rs = Math.max(0, Math.floor(top / L.lh) - 30), re = Math.min(n, Math.ceil((top + hgt) / L.lh) + 30);
    if (!L.dirty && rs === L.rs && re === L.re) return;
    L.dirty = false; L.rs = rs; L.re = re;
    box.style.transform = 'translateY(' + rs * L.lh + 'px)';
    const nodes = [];
    for (let i = rs; i < re; i++) nodes.push(lineEl(list[i]));
    box.replaceChildren(...nodes);
    if (nodes.length && !L.measured) {
      const m = nodes[0].getBoundingClientRect().height;
      L.measured = true;
      if (m > 4 && Math.abs(m - L.lh) > 0.5) { L.lh = m; L.dirty = true; schedule(); }
    }
  }
  const schedule = raf(render);

  function setFollow(on) {
    L.follow = on;
    const b = $('#log-follow');
    b.setAttribute('aria-pressed', String(on));
    text(b, on ? 'Following' : 'Paused · follow');
    box.dataset.follow = on ? 'on' : 'off';
    if (on) { L.target = 0; L.dirty = true; }
    schedule();
  }
  scroller.addEventListener('scroll', () => {
    if (L.follow && scroller.scrollTop < L.autoTop - 2 && Date.now() - L.resized > 300) setFollow(false);
    schedule();
  }, { passive: true });
  new ResizeObserver(() => { L.resized = Date.now(); schedule(); }).observe(scroller);

  function search(q, keepTarget) {
    L.q = q.trim().toLowerCase();
    L.matches = 0;
    for (const ln of L.lines) { ln.hit = matchOf(ln); if (ln.hit) L.matches++; }
    L.view = L.filter && L.q ? L.lines.filter((l) => l.hit) : null;
    if (!keepTarget) L.target = 0;
    L.dirty = true;
    count();
    schedule();
  }
  // Goes to the next (dir 1) or previous (-1) match from the current one, or the last.
  function step(dir) {
    if (!L.q || !L.matches) return;
    const hits = L.view || L.lines.filter((l) => l.hit);
    let i = hits.findIndex((l) => l.seq === L.target);
    i = i < 0 ? (dir > 0 ? 0 : hits.length - 1) : (i + dir + hits.length) % hits.length;
    show(hits[i]);
  }
  function show(ln) {
    setFollow(false);
    L.target = ln.seq;
    const list = L.view || L.lines;
    const idx = list.indexOf(ln);
    L.dirty = true;
    size();
    scroller.scrollTop = Math.max(0, idx * L.lh - scroller.clientHeight / 2);
    schedule();
    requestAnimationFrame(() => { const t = $('.log-line.target', box); if (t) t.scrollIntoView({ block: 'nearest' }); });
  }
  // After "logs around it": the last line containing q.
  // The last line matching `q`; when none does and `t` (an ISO time) is given, the last
  // line of the run that was live at `t` (its separator is the last one before `t`):
  // where a crash that printed nothing telling left its output.
  function jumpTo(q, t) {
    $('#log-q').value = q;
    search(q, false);
    const low = L.q;
    for (let i = L.lines.length - 1; i >= 0; i--) if (L.lines[i].plain.toLowerCase().includes(low)) { show(L.lines[i]); return; }
    const at = t ? Date.parse(t) : NaN;
    if (!isNaN(at)) {
      const runAt = (ln) => ln.sep ? Date.parse((/\d{4}-\d\d-\d\dT[\d:.]+Z/.exec(ln.plain) || [])[0]) : NaN;
      let start = -1;
      for (let i = 0; i < L.lines.length; i++) { const s = runAt(L.lines[i]); if (s <= at) start = i; else if (s > at) break; }
      if (start >= 0) {
        let end = start;
        while (end + 1 < L.lines.length && !L.lines[end + 1].sep) end++;
        show(L.lines[end]);
        text($('#log-status'), 'no line matches; this is where the run that was live then ended');
        return;
      }
    }
    text($('#log-status'), 'no line of the last ' + L.lines.length + ' matches');
  }

  function open(unit) {
    if (L.es) L.es.close();
    L.es = null;
    L.unit = unit;
    box.dataset.unit = unit;
    reset();
    schedule();
    text($('#log-status'), '');
    if (!unit) return;
    text($('#log-status'), 'loading…');
    const url = '/dashboard/api/logs?unit=' + encodeURIComponent(unit) + '&lines=' + LOG_MAX;
    L.es = stream(url, {
      lines: (d, first) => { text($('#log-status'), ''); ingest(Array.isArray(d.lines) ? d.lines : [], first); },
      // The history is in: a search asked for with the view ("logs around it") jumps now.
      caught_up: () => { const j = L.jump; L.jump = null; if (j) jumpTo(j[0], j[1]); },
      gone: (d) => { L.es && L.es.close(); text($('#log-status'), str(d.error) || 'unknown unit'); },
    }, (st, code) => {
      if (st === 'closed') text($('#log-status'), 'reconnecting…');
      if (st === 'failed') text($('#log-status'), 'log stream refused (HTTP ' + code + ')');
    });
  }

  const sel = $('#log-unit');
  sel.addEventListener('change', () => { location.hash = '#logs/' + encodeURIComponent(sel.value); });
  $('#log-q').addEventListener('input', debounce(() => search($('#log-q').value), 120));
  $('#log-q').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); step(e.shiftKey ? -1 : 1); } });
  $('#log-next').addEventListener('click', () => step(1));
  $('#log-prev').addEventListener('click', () => step(-1));
  $('#log-mode').addEventListener('click', (e) => {
    L.filter = !L.filter;
    e.currentTarget.setAttribute('aria-pressed', String(L.filter));
    search($('#log-q').value, true);
    const t = L.lines.find((l) => l.seq === L.target);
    if (t && (!L.view || t.hit)) show(t);
  });
  $('#log-follow').addEventListener('click', () => setFollow(!L.follow));

  return {
    following: () => L.follow,
    setFollow,
    enter(unit, p) {
      if (!unit) {
        unit = L.unit || sel.value || (S.units.processes[0] || S.units.servers[0] || '');
        if (unit) setHash('#logs/' + encodeURIComponent(unit));
      }
      if (unit && ![...sel.options].some((o) => o.value === unit)) sel.append(h('option', { value: unit }, unit));
      sel.value = unit;
      const q = p.get('q'), t = p.get('t');
      if (unit !== L.unit || !L.es) { open(unit); if (q != null) L.jump = [q, t]; }
      else if (q != null) jumpTo(q, t);
      if (q == null) { L.dirty = true; schedule(); }
    },
    close() { if (L.es) L.es.close(); L.es = null; },
  };
})();

function updateUnits(d) {
  const s = (d.servers || []).map((r) => r.name), p = (d.processes || []).map((r) => r.name);
  const key = s.join('\n') + '\0' + p.join('\n');
  if (key === S.units.key) return;
  S.units = { servers: s, processes: p, key };
  const sel = $('#log-unit'), cur = sel.value;
  $('#log-servers').replaceChildren(...s.map((n) => h('option', { value: n }, n)));
  $('#log-processes').replaceChildren(...p.map((n) => h('option', { value: n }, n)));
  for (const o of [...sel.options]) if (o.parentElement === sel && o.value && (s.includes(o.value) || p.includes(o.value))) o.remove();
  sel.value = cur;
  if (view === 'logs' && !arg) logs.enter('', params);
}

// ---------- traffic ----------

const TR_MAX = 1000;
const statusClass = (e) => (e.error && e.status == null ? 'errors' : e.status == null ? (e.aborted ? 'aborted' : 'pending') : Math.floor(e.status / 100) + 'xx');
const isErr = (e) => (e.status != null && e.status >= 400) || !!e.error;
const traffic = (() => {
  const T = { proxy: '', es: null, entries: new Map(), browser: [], sel: null, classes: new Set(), path: '' };
  const tbody = $('#traffic-rows'), detail = $('#tr-detail');
  const pending = { entries: [], browser: [] };

  function matches(e) {
    if (T.classes.size && !(T.classes.has(statusClass(e)) || (T.classes.has('errors') && isErr(e)))) return false;
    return !T.path || String(e.url || e.path || '').toLowerCase().includes(T.path);
  }
  function row(e) {
    const st = e.status != null ? String(e.status) : e.error ? 'error' : e.aborted ? 'aborted' : '';
    const tr = h('tr', { class: 'traffic-row' + (isErr(e) ? ' is-bad' : ''), 'data-id': e.id, 'data-status': st, 'data-class': statusClass(e) },
      h('td', { class: 'mono muted' }, clock(e.ts)),
      h('td', { class: 'mono' }, e.method),
      h('td', { class: 'path' }, h('button', { type: 'button', class: 'linkish', title: str(e.url) }, str(e.url || e.path))),
      h('td', { class: 'mono status' }, st + (e.aborted && e.status != null ? ' (aborted)' : '')),
      h('td', { class: 'num' }, e.total_ms != null ? (+e.total_ms).toFixed(e.total_ms < 10 ? 1 : 0) + ' ms' : ''),
      h('td', { class: 'num muted' }, e.response_bytes != null ? bytes(e.response_bytes) : ''));
    tr._e = e;
    tr.hidden = !matches(e);
    return tr;
  }
  const flush = raf(() => {
    if (pending.entries.length) {
      const frag = document.createDocumentFragment();
      for (let i = pending.entries.length - 1; i >= 0; i--) {
        const e = pending.entries[i];
        if (T.entries.has(e.id)) continue;
        const tr = row(e);
        T.entries.set(e.id, tr);
        frag.append(tr);
      }
      tbody.prepend(frag);
      pending.entries = [];
      while (T.entries.size > TR_MAX) { const [k, tr] = T.entries.entries().next().value; T.entries.delete(k); tr.remove(); }
      counts();
    }
    if (pending.browser.length) {
      const ul = $('#browser-errors');
      const frag = document.createDocumentFragment();
      for (let i = pending.browser.length - 1; i >= 0; i--) frag.append(browserEl(pending.browser[i]));
      ul.prepend(frag);
      T.browser.push(...pending.browser);
      pending.browser = [];
      while (ul.children.length > TR_MAX) ul.lastChild.remove();
      if (T.browser.length > TR_MAX) T.browser.splice(0, T.browser.length - TR_MAX);
      text($('#br-count'), T.browser.length);
    }
  });
  function counts() {
    let shown = 0;
    for (const tr of T.entries.values()) if (!tr.hidden) shown++;
    text($('#tr-count'), shown === T.entries.size ? T.entries.size + ' requests' : shown + ' of ' + T.entries.size);
  }
  function refilter() {
    for (const tr of T.entries.values()) tr.hidden = !matches(tr._e);
    counts();
  }
  function browserEl(b) {
    const li = h('li', { class: 'browser-error', 'data-kind': b.kind, 'data-id': b.id },
      h('div', null, h('span', { class: 'tag bad' }, b.kind), ' ', h('span', { class: 'title' }, firstLine(b.message)),
        b.count > 1 ? ' ×' + b.count : '', ' ', h('span', { class: 'muted' }, clock(b.ts))),
      h('div', { class: 'muted mono' }, b.location || (b.source ? b.source + ':' + b.line + ':' + b.column : ''), b.page ? ' · ' : '', b.page ? extLink(b.page) : null,
        b.request ? ' · request ' + b.request : ''));
    if (b.stack || String(b.message).includes('\n')) li.append(h('details', null, h('summary', null, 'stack'), h('pre', null, str(b.message) + '\n' + str(b.stack))));
    return li;
  }
  function select(id) {
    for (const tr of tbody.querySelectorAll('tr.selected')) tr.classList.remove('selected');
    const tr = id != null && T.entries.get(id);
    if (!tr) {
      const had = !detail.hidden;
      detail.hidden = true; T.sel = null;
      if (had && T.lastFocus && document.contains(T.lastFocus)) T.lastFocus.focus();
      return;
    }
    T.sel = id;
    tr.classList.add('selected');
    const e = tr._e;
    const dl = h('dl', { class: 'kv' });
    kv(dl, 'request', e.method + ' ' + str(e.url || e.path), 'pre');
    kv(dl, 'status', e.status ?? (e.error ? 'no answer' : '–'));
    kv(dl, 'time', e.ts && new Date(e.ts).toLocaleString());
    kv(dl, 'response head', e.headers_ms != null ? (+e.headers_ms).toFixed(1) + ' ms' : null);
    kv(dl, 'total', e.total_ms != null ? (+e.total_ms).toFixed(1) + ' ms' : null);
    kv(dl, 'sent', e.request_bytes != null ? bytes(e.request_bytes) : null);
    kv(dl, 'received', e.response_bytes != null ? bytes(e.response_bytes) + (e.content_type ? ' · ' + e.content_type : '') : null);
    kv(dl, 'request id', e.request_id, 'mono');
    kv(dl, "client's X-Request-Id", e.client_request_id, 'mono');
    kv(dl, 'error', e.error, 'pre bad');
    kv(dl, 'message', e.message, 'pre');
    if (e.aborted) kv(dl, 'aborted', 'the client went away before the response ended');
    if (e.cross_site) kv(dl, 'cross-site', 'sent by another site' + (e.origin ? ' (' + e.origin + ')' : ''));
    if (e.document) kv(dl, 'document', 'a page load (error script injected)');
    const known = new Set(['id', 'ts', 'method', 'url', 'path', 'status', 'headers_ms', 'total_ms', 'request_bytes', 'response_bytes', 'content_type', 'request_id', 'client_request_id', 'error', 'message', 'aborted', 'cross_site', 'origin', 'document', 'excerpt']);
    for (const [k, v] of Object.entries(e)) {
      if (known.has(k) || v == null) continue;
      // Headers (request_headers / response_headers / headers) and any later field.
      if (v && typeof v === 'object') kv(dl, k.replace(/_/g, ' '), Object.entries(v).map(([a, b]) => (Array.isArray(v) ? str(b) : a + ': ' + str(b))).join('\n'), 'pre mono');
      else kv(dl, k.replace(/_/g, ' '), v, 'pre');
    }
    const related = T.browser.filter((b) => b.request && b.request === e.request_id);
    detail.replaceChildren(
      h('div', { class: 'detail-head' }, h('h2', null, 'Request #' + e.id), h('button', { type: 'button', class: 'close', 'aria-label': 'Close details (Esc)' }, '×')),
      dl,
      e.excerpt ? h('h3', null, 'Response excerpt') : '', e.excerpt ? h('pre', { class: 'excerpt' }, str(e.excerpt)) : '',
      related.length ? h('h3', null, 'Browser errors for this request') : '',
      related.length ? h('ul', { class: 'browser-errors' }, ...related.map(browserEl)) : '');
    detail.hidden = false;
  }
  tbody.addEventListener('click', (e) => {
    const tr = e.target.closest('tr.traffic-row');
    if (!tr) return;
    T.lastFocus = $('button', tr);
    const id = tr._e.id;
    select(T.sel === id ? null : id);
  });
  detail.addEventListener('click', (e) => { if (e.target.closest('.close')) select(null); });
  for (const b of document.querySelectorAll('.tr-class')) b.addEventListener('click', () => {
    const c = b.dataset.class, on = !T.classes.has(c);
    if (on) T.classes.add(c); else T.classes.delete(c);
    b.setAttribute('aria-pressed', String(on));
    refilter();
  });
  $('#tr-path').addEventListener('input', debounce(() => { T.path = $('#tr-path').value.trim().toLowerCase(); refilter(); }, 120));
  const sel = $('#tr-proxy');
  sel.addEventListener('change', () => { location.hash = '#traffic/' + encodeURIComponent(sel.value); });

  function clear() {
    T.entries.clear(); T.browser = []; pending.entries = []; pending.browser = [];
    tbody.replaceChildren(); $('#browser-errors').replaceChildren();
    select(null); counts(); text($('#br-count'), '');
  }
  function open(proxy) {
    if (T.es) T.es.close();
    T.es = null; T.proxy = proxy;
    clear();
    showUrl();
    if (!proxy) return;
    const url = '/dashboard/api/traffic?proxy=' + encodeURIComponent(proxy) + '&limit=' + TR_MAX;
    T.es = stream(url, {
      traffic: (d, first) => {
        if (first) clear();
        if (Array.isArray(d.entries)) pending.entries.push(...d.entries);
        if (Array.isArray(d.browser)) pending.browser.push(...d.browser);
        flush();
      },
      gone: (d) => { T.es && T.es.close(); text($('#tr-count'), str(d.error) || 'unknown proxy'); },
    }, (st, code) => { if (st === 'failed') text($('#tr-count'), 'traffic stream refused (HTTP ' + code + ')'); });
  }
  function showUrl() {
    const p = S.proxies.find((x) => x.name === T.proxy);
    const el = $('#tr-url');
    if ((el.dataset.url || '') !== ((p && p.url) || '')) { el.dataset.url = (p && p.url) || ''; el.replaceChildren(p && p.url ? extLink(p.url) : ''); }
  }
  return {
    select,
    enter(proxy, p) {
      if (!proxy) {
        proxy = T.proxy || (S.proxies[0] && S.proxies[0].name) || '';
        if (proxy) setHash('#traffic/' + encodeURIComponent(proxy));
      }
      if (proxy && ![...sel.options].some((o) => o.value === proxy)) sel.append(h('option', { value: proxy }, proxy));
      sel.value = proxy;
      if (p.has('path')) { $('#tr-path').value = p.get('path'); T.path = p.get('path').toLowerCase(); refilter(); }
      if (proxy !== T.proxy || !T.es) open(proxy);
    },
    close() { if (T.es) T.es.close(); T.es = null; },
    proxiesChanged() {
      const names = S.proxies.map((p) => p.name);
      const have = [...sel.options].slice(1).map((o) => o.value);
      if (names.join('\n') !== have.join('\n')) {
        const cur = sel.value;
        sel.replaceChildren(h('option', { value: '' }, 'choose…'), ...names.map((n) => h('option', { value: n }, n)));
        if (cur && !names.includes(cur)) sel.append(h('option', { value: cur }, cur));
        sel.value = cur;
      }
      showUrl();
      if (view === 'traffic' && !T.proxy && names.length) this.enter('', params);
    },
  };
})();
function bytes(n) { n = +n; return n < 1024 ? n + ' B' : n < 1048576 ? (n / 1024).toFixed(1) + ' KB' : (n / 1048576).toFixed(1) + ' MB'; }

// ---------- tools ----------

const tools = (() => {
  const T = { list: null, failed: [], loading: null, stale: false, sel: '' };
  const ul = $('#tool-list'), pane = $('#tool-detail');

  async function load() {
    text($('#tool-count'), 'loading…');
    const r = await api('/dashboard/api/tools');
    T.stale = false;
    if (!Array.isArray(r.tools)) { text($('#tool-count'), r.error || 'could not list the tools'); T.list = []; return; }
    T.list = r.tools; T.failed = r.failed || [];
    const f = $('#tool-failed');
    f.replaceChildren(...T.failed.map((x) => h('li', null, "server '" + str(x.server) + "' failed to start: " + str(x.error))));
    f.hidden = !T.failed.length;
    renderList();
    if (T.sel && view === 'tools') show(T.sel);
  }
  function renderList() {
    const q = $('#tool-q').value.trim().toLowerCase();
    const items = (T.list || []).filter((t) => !q || (str(t.name) + ' ' + str(t.description)).toLowerCase().includes(q));
    ul.replaceChildren(...items.map((t) => h('li', null,
      h('button', { type: 'button', class: 'tool' + (t.name === T.sel ? ' selected' : ''), 'data-tool': t.name, 'aria-current': t.name === T.sel ? 'true' : null },
        h('span', { class: 'name' }, str(t.name)), h('span', { class: 'desc' }, firstLine(t.description))))));
    text($('#tool-count'), items.length + ' of ' + T.list.length + ' tools');
  }
  ul.addEventListener('click', (e) => { const b = e.target.closest('.tool'); if (b) location.hash = '#tools/' + encodeURIComponent(b.dataset.tool); });
  $('#tool-q').addEventListener('input', debounce(renderList, 80));
  $('#tool-reload').addEventListener('click', load);

  function typeOf(s) {
    if (!s || typeof s !== 'object') return 'json';
    if (Array.isArray(s.enum) && s.enum.length) return 'enum';
    let t = s.type;
    if (Array.isArray(t)) { const nn = t.filter((x) => x !== 'null'); t = nn.length === 1 ? nn[0] : 'json'; }
    return ['string', 'number', 'integer', 'boolean'].includes(t) ? t : 'json';
  }
  function field(name, s, required) {
    s = s && typeof s === 'object' ? s : {};
    const t = typeOf(s), id = 'arg-' + name.replace(/[^\w-]/g, '_');
    const has = Object.prototype.hasOwnProperty.call(s, 'default');
    let input;
    if (t === 'enum') {
      input = h('select', { id, name });
      if (!required || !has) input.append(h('option', { value: '' }, required ? 'choose…' : '(none)'));
      s.enum.forEach((v, i) => input.append(h('option', { value: String(i) }, typeof v === 'string' ? v : JSON.stringify(v))));
      if (has) { const i = s.enum.findIndex((v) => JSON.stringify(v) === JSON.stringify(s.default)); if (i >= 0) input.value = String(i); }
    } else if (t === 'boolean') {
      input = h('input', { id, name, type: 'checkbox' });
      input.checked = s.default === true;
    } else if (t === 'number' || t === 'integer') {
      input = h('input', { id, name, type: 'number', step: t === 'integer' ? '1' : 'any', min: s.minimum, max: s.maximum });
      if (has && s.default != null) input.value = String(s.default);
    } else if (t === 'string') {
      const long = (s.maxLength == null || s.maxLength > 200) && (/content|text|body|code|script|query|message|prompt|source|patch|diff|json|markdown|html|sql/i.test(name) || s.format === 'textarea');
      input = long ? h('textarea', { id, name, rows: 4 }) : h('input', { id, name, type: 'text', placeholder: s.format || s.pattern || null });
      if (has && s.default != null) input.value = String(s.default);
    } else {
      input = h('textarea', { id, name, rows: 4, class: 'mono', placeholder: 'JSON' + (s.type ? ' (' + [].concat(s.type).join(' | ') + ')' : '') });
      if (has) input.value = JSON.stringify(s.default, null, 2);
    }
    if (required && t !== 'boolean') input.required = true;
    input.dataset.kind = t;
    const label = h('label', { for: id }, h('span', { class: 'mono' }, name), required ? h('abbr', { class: 'req', title: 'required' }, '*') : null,
      h('span', { class: 'muted' }, ' ' + (t === 'json' ? 'JSON' : t)));
    return h('div', { class: 'field' + (t === 'boolean' ? ' check' : '') }, label, input,
      s.description ? h('div', { class: 'muted help' }, str(s.description)) : null, h('div', { class: 'ferr err', 'aria-live': 'polite' }));
  }
  function collect(form, schema) {
    const props = (schema && schema.properties) || {};
    const req = new Set((schema && schema.required) || []);
    const args = {};
    let bad = false;
    for (const el of form.querySelectorAll('[data-kind]')) {
      const name = el.name, s = props[name] || {}, k = el.dataset.kind;
      const errEl = $('.ferr', el.closest('.field'));
      text(errEl, '');
      const fail = (m) => { text(errEl, m); bad = true; };
      if (k === 'raw') { try { const v = el.value.trim() ? JSON.parse(el.value) : {}; if (!v || typeof v !== 'object' || Array.isArray(v)) fail('the arguments must be a JSON object'); else Object.assign(args, v); } catch (x) { fail('not JSON: ' + x.message); } continue; }
      if (k === 'boolean') { if (el.checked || req.has(name) || 'default' in s) args[name] = el.checked; continue; }
      const v = el.value;
      if (v === '') { if (req.has(name)) fail('required'); continue; }
      if (k === 'enum') args[name] = s.enum[+v];
      else if (k === 'number' || k === 'integer') { const n = Number(v); if (!isFinite(n) || (k === 'integer' && !Number.isInteger(n))) fail('not ' + (k === 'integer' ? 'an integer' : 'a number')); else args[name] = n; }
      else if (k === 'json') { try { args[name] = JSON.parse(v); } catch (x) { fail('not JSON: ' + x.message); } }
      else args[name] = v;
    }
    return bad ? null : args;
  }
  function show(name) {
    T.sel = name;
    for (const b of ul.querySelectorAll('.tool')) { const on = b.dataset.tool === name; b.classList.toggle('selected', on); if (on) b.setAttribute('aria-current', 'true'); else b.removeAttribute('aria-current'); }
    const t = (T.list || []).find((x) => x.name === name);
    if (!t) { pane.replaceChildren(h('p', { class: 'muted' }, T.list ? 'No tool named ' + name + '.' : 'Loading…')); return; }
    const schema = t.inputSchema && typeof t.inputSchema === 'object' ? t.inputSchema : {};
    const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : null;
    const form = h('form', { id: 'tool-form', novalidate: true, 'data-tool': t.name });
    if (props && Object.keys(props).length) {
      const req = new Set(Array.isArray(schema.required) ? schema.required : []);
      for (const [k, s] of Object.entries(props)) form.append(field(k, s, req.has(k)));
    } else if (props) {
      form.append(h('p', { class: 'muted' }, 'No arguments.'));
    } else {
      const ta = h('textarea', { id: 'arg-raw', name: '', rows: 6, class: 'mono', 'data-kind': 'raw' }, '{}');
      form.append(h('div', { class: 'field' }, h('label', { for: 'arg-raw' }, 'arguments (JSON object)'), ta, h('div', { class: 'ferr err' })));
    }
    const result = h('output', { id: 'tool-result', for: 'tool-form', class: 'result', 'aria-live': 'polite' });
    const elapsed = h('span', { id: 'tool-elapsed', class: 'muted' });
    const submit = h('button', { type: 'submit', class: 'primary' }, 'Call ' + t.name);
    form.append(h('div', { class: 'submit' }, submit, ' ', elapsed));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const args = collect(form, schema);
      if (!args) return;
      submit.disabled = true;
      text(elapsed, 'calling…');
      result.replaceChildren();
      delete result.dataset.state;
      const t0 = performance.now();
      const r = await api('/dashboard/api/call', { tool: t.name, arguments: args });
      submit.disabled = false;
      text(elapsed, r.elapsed_ms != null ? (+r.elapsed_ms).toFixed(1) + ' ms' : (performance.now() - t0).toFixed(0) + ' ms (round trip)');
      showResult(result, r);
    });
    pane.replaceChildren(
      h('h2', { class: 'mono' }, str(t.name)),
      t.server ? h('p', { class: 'muted' }, 'server ' + str(t.server)) : '',
      h('p', { class: 'desc pre' }, str(t.description)),
      form, result,
      h('details', { class: 'schema' }, h('summary', null, 'inputSchema'), h('pre', null, JSON.stringify(schema, null, 2))),
      t.outputSchema ? h('details', { class: 'schema' }, h('summary', null, 'outputSchema'), h('pre', null, JSON.stringify(t.outputSchema, null, 2))) : '');
  }
  function showResult(out, r) {
    if (!r.ok) { out.dataset.state = 'failed'; out.append(h('p', { class: 'err' }, 'call failed: ' + str(r.error))); return; }
    const res = r.result || {};
    out.dataset.state = res.isError ? 'error' : 'ok';
    if (res.isError) out.append(h('p', { class: 'tag bad' }, 'isError: the tool reports an error'));
    for (const c of Array.isArray(res.content) ? res.content : []) {
      if (c && c.type === 'text') out.append(h('pre', { class: 'content-text' + (res.isError ? ' bad' : '') }, str(c.text)));
      else if (c && c.type === 'image' && /^image\/[\w.+-]+$/i.test(c.mimeType || '') && /^[A-Za-z0-9+/=\s]*$/.test(c.data || '')) {
        out.append(h('img', { class: 'content-img', alt: 'image result (' + c.mimeType + ')', src: 'data:' + c.mimeType + ';base64,' + String(c.data).replace(/\s/g, '') }));
      } else out.append(h('pre', { class: 'content-other' }, JSON.stringify(c, null, 2)));
    }
    if (res.structuredContent !== undefined) out.append(h('h3', null, 'structuredContent'), h('pre', { class: 'structured' }, JSON.stringify(res.structuredContent, null, 2)));
    if (!out.firstChild) out.append(h('p', { class: 'muted' }, '(empty result)'));
  }
  return {
    enter(name) {
      if (!name && T.sel) { name = T.sel; setHash('#tools/' + encodeURIComponent(name)); }
      T.sel = name;
      if (!T.list || T.stale) load();
      else if (name) show(name);
    },
    changed() { T.stale = true; if (view === 'tools') load(); },
  };
})();

// ---------- events ----------

const EV_MAX = 5000;
const events = (() => {
  const list = $('#event-list'), scroller = $('#ev-scroll');
  const pending = [];
  let kind = '', q = '';
  function matches(row) {
    return (!kind || row.dataset.kind.startsWith(kind)) && (!q || row._t.includes(q));
  }
  const flush = raf(() => {
    const stick = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
    const frag = document.createDocumentFragment();
    for (const ev of pending) {
      const rest = Object.entries(ev).filter(([k]) => k !== 'ts' && k !== 'kind' && k !== 'source');
      const summary = rest.map(([k, v]) => k + '=' + str(v)).join('  ');
      const k = str(ev.kind);
      const row = h('div', { class: 'event-row k-' + k.split('.')[0] + (/crash|fail|gave_up|error|alert|dropped|escaped|timeout/.test(k) ? ' is-bad' : ''), 'data-kind': k },
        h('span', { class: 'mono muted' }, clock(ev.ts)), h('span', { class: 'kind mono' }, k), h('span', { class: 'mono' }, str(ev.source)), h('span', { class: 'sum' }, summary));
      row.title = str(ev.ts);
      row._t = (k + ' ' + str(ev.source) + ' ' + summary).toLowerCase();
      row.hidden = !matches(row);
      frag.append(row);
    }
    pending.length = 0;
    list.append(frag);
    while (list.childElementCount > EV_MAX) list.firstElementChild.remove();
    counts();
    if (stick) scroller.scrollTop = scroller.scrollHeight;
  });
  function counts() {
    let n = 0;
    for (const r of list.children) if (!r.hidden) n++;
    text($('#ev-count'), n === list.childElementCount ? n + ' events' : n + ' of ' + list.childElementCount);
  }
  function refilter() {
    for (const r of list.children) r.hidden = !matches(r);
    counts();
    scroller.scrollTop = scroller.scrollHeight;
  }
  $('#ev-kind').addEventListener('change', (e) => { kind = e.target.value; refilter(); });
  $('#ev-q').addEventListener('input', debounce(() => { q = $('#ev-q').value.trim().toLowerCase(); refilter(); }, 120));
  return {
    add(batch, first) {
      if (first) { list.replaceChildren(); pending.length = 0; }
      pending.push(...batch.filter((e) => e && typeof e === 'object'));
      if (pending.length > EV_MAX) pending.splice(0, pending.length - EV_MAX);
      flush();
    },
    enter() { flush(); requestAnimationFrame(() => { scroller.scrollTop = scroller.scrollHeight; }); },
  };
})();

function onJournal(batch, first) {
  events.add(batch, first);
  if (!first && batch.some((e) => e && /^server\.(ready|tools_changed|stopped|crashed)$/.test(e.kind))) tools.changed();
}

// ---------- wiring ----------

function tickAll() {
  for (const el of document.querySelectorAll('#view-' + (view || 'overview') + ' .tick')) tickOne(el);
}
setInterval(tickAll, 1000);

document.addEventListener('click', (e) => {
  const b = e.target.closest('button[data-action]');
  if (b) { act(b); return; }
  const t = e.target.closest('.inc-toggle');
  if (t) toggleIncident(t.closest('.incident'));
});
for (const id of ['#err-source', '#err-state']) $(id).addEventListener('change', filterErrors);
$('#err-q').addEventListener('input', debounce(filterErrors, 100));
$('#help-btn').addEventListener('click', () => $('#help').showModal());
$('#logout').addEventListener('click', async () => {
  await api('/dashboard/api/logout', {});
  sessionEnded();
});
$('#help-close').addEventListener('click', () => $('#help').close());
text($('#project'), document.title.replace(/ · Corral$/, '').replace('{{PROJECT}}', ''));
window.addEventListener('hashchange', route);
route();
startMain();
