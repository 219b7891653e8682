// Grackle's web view: plain DOM code, no framework, no build step. It
// reads /ui/api/* (JSON from the public API) and, for the semaphore shown,
// follows /ui/api/.../watch (server-sent events, read with fetch so the
// access token can go in a header). The token lives in sessionStorage
// only: it ends with the browser tab.
'use strict';

const TOKEN_KEY = 'grackle-token';
const POLL_MS = 3000;
const $ = (id) => document.getElementById(id);

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

function headers() {
  const t = token();
  return t ? { Authorization: 'Bearer ' + t } : {};
}

class AuthError extends Error {}

async function api(path) {
  const r = await fetch('/ui/api/' + path, { headers: headers(), cache: 'no-store' });
  if (r.status === 401 || r.status === 403) {
    askToken(r.status === 403 ? 'This token may not read this. Use another one.' : 'This cluster requires an access token.');
    throw new AuthError('auth');
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.code + ': ' + body.message);
  return body;
}

// el builds an element; children are nodes or text (never parsed as HTML).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function fill(tbody, rows, cols, emptyText) {
  tbody.replaceChildren(...(rows.length ? rows : [el('tr', { class: 'empty' }, el('td', { colSpan: cols }, emptyText))]));
}

// Timestamps are Unix nanoseconds, as strings (int64 in JSON).
function when(ns) {
  if (!ns || ns === '0') return '-';
  const ms = Number(BigInt(ns) / 1000000n);
  const d = (Date.now() - ms) / 1000;
  const rel = Math.abs(d) < 1 ? 'now' : d > 0 ? human(d) + ' ago' : 'in ' + human(-d);
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' (' + rel + ')';
}

function human(s) {
  if (s < 60) return Math.round(s) + 's';
  if (s < 3600) return Math.round(s / 60) + 'm';
  if (s < 86400) return (s / 3600).toFixed(1) + 'h';
  return (s / 86400).toFixed(1) + 'd';
}

function showError(msg) {
  const e = $('error');
  e.textContent = msg || '';
  e.hidden = !msg;
}

function askToken(why) {
  $('login-why').textContent = why;
  $('login').hidden = false;
}

$('login').addEventListener('submit', (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
  $('token').value = '';
  $('login').hidden = true;
  route();
});

$('forget').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  route();
});

// ---- routing: #/, #/ns/NS, #/ns/NS/sem/SEM ----

let view = { ns: '', sem: '' };
let pollTimer = null;
let watchCtl = null;

function parseHash() {
  const p = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const v = { ns: '', sem: '' };
  if (p[0] === 'ns' && p[1]) v.ns = p[1];
  if (v.ns && p[2] === 'sem' && p[3]) v.sem = p[3];
  return v;
}

function href(ns, sem) {
  let h = '#/ns/' + encodeURIComponent(ns);
  if (sem) h += '/sem/' + encodeURIComponent(sem);
  return h;
}

function route() {
  view = parseHash();
  $('forget').hidden = !token();
  $('namespace').hidden = !view.ns || !!view.sem;
  $('semaphore').hidden = !view.sem;
  $('cluster').hidden = !!view.ns;
  stopWatch();
  if (view.sem) startWatch(view.ns, view.sem);
  refresh();
}

window.addEventListener('hashchange', route);

async function refresh() {
  clearTimeout(pollTimer);
  try {
    const jobs = [loadCluster(), loadNamespaces()];
    if (view.ns && !view.sem) jobs.push(loadNamespace(view.ns));
    await Promise.all(jobs);
    if (!watchError) showError('');
  } catch (e) {
    if (!(e instanceof AuthError)) showError(e.message);
  }
  pollTimer = setTimeout(refresh, POLL_MS);
}

// ---- cluster, namespaces, semaphores, leases (polled) ----

async function loadCluster() {
  const st = await api('cluster');
  $('leader').textContent = st.leader_id ? 'leader: ' + st.leader_id + ' (' + st.leader_address + '), term ' + st.term : 'no leader known';
  $('leader').dataset.leader = st.leader_id || '';
  fill($('members'), st.members.map((m) => el('tr', { 'data-node': m.node_id },
    el('td', {}, m.node_id + (m.node_id === st.leader_id ? ' ★' : '')), el('td', {}, m.grpc_address), el('td', {}, m.raft_address),
    el('td', {}, m.state), el('td', {}, m.suffrage), el('td', { class: 'num' }, m.last_contact_ms === '-1' ? '-' : m.last_contact_ms + ' ms'))),
  6, 'no members');
  $('indexes').textContent = 'commit index ' + st.commit_index + ', applied index ' + st.applied_index;
}

async function loadNamespaces() {
  const r = await api('namespaces');
  const ul = $('namespaces');
  ul.replaceChildren(...r.namespaces.map((n) => el('li', {},
    el('a', { href: href(n.name), class: n.name === view.ns ? 'current' : '', title: n.description }, n.name))));
  if (!r.namespaces.length) ul.replaceChildren(el('li', { class: 'muted' }, 'none yet'));
}

function bar(used, permits) {
  const fillEl = el('span', {});
  fillEl.style.width = (permits > 0 ? Math.min(100, (100 * used) / permits) : 0) + '%';
  return el('span', { class: 'bar' }, fillEl);
}

async function loadNamespace(ns) {
  $('ns-name').textContent = ns;
  const proc = $('proc-filter').value.trim();
  const [sems, leases] = await Promise.all([
    api('namespaces/' + encodeURIComponent(ns) + '/semaphores'),
    api('namespaces/' + encodeURIComponent(ns) + '/leases' + (proc ? '?process_id=' + encodeURIComponent(proc) : '')),
  ]);
  fill($('semaphores'), sems.semaphores.map((s) => {
    const used = Number(s.active_holds), permits = Number(s.permits);
    const bar0 = el('td', {}, bar(used, permits));
    return el('tr', { 'data-sem': s.name },
      el('td', {}, el('a', { href: href(ns, s.name) }, s.name)),
      el('td', { class: 'num' }, used + ' / ' + (permits - used) + ' of ' + permits), bar0,
      el('td', { class: 'num' }, s.active_holders_count), el('td', {}, s.description));
  }), 5, 'no semaphores');
  const byProc = [...leases.leases].sort((a, b) => a.process_id.localeCompare(b.process_id) || a.lease_id.localeCompare(b.lease_id));
  fill($('leases'), byProc.map((l) => el('tr', { 'data-lease': l.lease_id },
    el('td', {}, l.process_id), el('td', {}, l.lease_id), el('td', { class: 'num' }, l.ttl_seconds + 's'), el('td', {}, when(l.expires_at)))),
  4, proc ? 'no live lease of this process' : 'no live leases');
}

$('proc-filter').addEventListener('input', () => { if (view.ns) loadNamespace(view.ns).catch((e) => showError(e.message)); });

// ---- a semaphore, live ----

let watchError = '';

function stopWatch() {
  if (watchCtl) watchCtl.abort();
  watchCtl = null;
}

function setLive(state, text) {
  const b = $('live');
  b.className = 'badge ' + state;
  b.textContent = text;
}

async function startWatch(ns, sem) {
  const ctl = new AbortController();
  watchCtl = ctl;
  $('sem-ns').textContent = ns;
  $('sem-ns').href = href(ns);
  $('sem-name').textContent = sem;
  setLive('', 'connecting');
  while (!ctl.signal.aborted) {
    try {
      const r = await fetch('/ui/api/namespaces/' + encodeURIComponent(ns) + '/semaphores/' + encodeURIComponent(sem) + '/watch',
        { headers: headers(), signal: ctl.signal, cache: 'no-store' });
      if (r.status === 401 || r.status === 403) {
        askToken(r.status === 403 ? 'This token may not read this semaphore.' : 'This cluster requires an access token.');
        setLive('down', 'no access');
        return;
      }
      if (!r.ok) {
        const body = await r.json();
        throw new Error(body.code + ': ' + body.message);
      }
      await readEvents(r.body.getReader(), ctl);
    } catch (e) {
      if (ctl.signal.aborted) return;
      watchError = e.message;
      showError(e.message);
      setLive('down', 'reconnecting');
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}

async function readEvents(reader, ctl) {
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done || ctl.signal.aborted) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const chunk = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = 'message', data = '';
      for (const line of chunk.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      if (event === 'state') {
        showState(JSON.parse(data));
      } else if (event === 'end') {
        const e = JSON.parse(data);
        throw new Error('watch ended: ' + e.code + ': ' + e.message);
      }
    }
  }
}

function showState(m) {
  watchError = '';
  showError('');
  setLive('live', 'live');
  const s = m.semaphore, used = Number(s.active_holds), permits = Number(s.permits);
  $('sem-permits').textContent = used + ' of ' + permits + ' permits used, ' + (permits - used) + ' free';
  $('sem-bar').style.width = (permits > 0 ? Math.min(100, (100 * used) / permits) : 0) + '%';
  $('sem-index').textContent = 'raft index ' + m.raft_index + (Number(m.changes) > 1 ? ' (' + m.changes + ' changes)' : '');
  $('semaphore').dataset.index = m.raft_index;
  $('holders-count').textContent = '(' + s.active_holders_count + ')';
  fill($('holders'), m.holders.map((h) => el('tr', { 'data-process': h.process_id, 'data-lease': h.lease_id },
    el('td', {}, h.process_id), el('td', {}, h.lease_id), el('td', { class: 'num' }, h.weight), el('td', { class: 'num' }, h.fencing_token),
    el('td', {}, when(h.locked_at)), el('td', {}, when(h.expires_at)))), 6, 'nobody holds it');
  $('waiters-count').textContent = '(' + m.waiters_count + ')';
  fill($('waiters'), m.waiters.map((w) => el('tr', { 'data-process': w.process_id, 'data-position': w.position },
    el('td', { class: 'num' }, w.position), el('td', {}, w.process_id), el('td', {}, w.lease_id), el('td', { class: 'num' }, w.weight),
    el('td', { class: 'num' }, w.waiting_weight), el('td', {}, when(w.waiting_since)), el('td', {}, when(w.deadline)))), 7, 'nobody waits');
}

route();
