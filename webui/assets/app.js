// Grackle's web view: plain DOM code, no framework, no build step. It
// reads /ui/api/* (JSON from the public API) and, for the semaphore or
// lock shown, follows its watch (server-sent events, read with fetch so
// the access token can go in a header). The token lives in sessionStorage
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

// whenCell is a table cell with the time of day and how long ago (or
// until), the full date in its tooltip: the lock tables are wide already
// (lease ids are long).
function whenCell(ns) {
  if (!ns || ns === '0') return el('td', {}, '-');
  const full = when(ns);
  const day = full.slice(0, 10) === new Date().toISOString().slice(0, 10);
  return el('td', { title: full }, day ? full.slice(11) : full);
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

// ---- routing: #/, #/ns/NS, #/ns/NS/sem/SEM, #/ns/NS/locks[/LOCK/NAME] ----

let view = { ns: '', sem: '', locks: false, lock: '' };
let pollTimer = null;
let watchCtl = null;

function parseHash() {
  const p = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const v = { ns: '', sem: '', locks: false, lock: '' };
  if (p[0] === 'ns' && p[1]) v.ns = p[1];
  if (v.ns && p[2] === 'sem' && p[3]) v.sem = p[3];
  if (v.ns && p[2] === 'locks') {
    v.locks = true;
    // A lock name is the rest of the path: its segments are the hash's.
    v.lock = p.slice(3).filter((x) => x !== '').join('/');
  }
  return v;
}

function href(ns, sem) {
  let h = '#/ns/' + encodeURIComponent(ns);
  if (sem) h += '/sem/' + encodeURIComponent(sem);
  return h;
}

function lockHref(ns, lock) {
  let h = '#/ns/' + encodeURIComponent(ns) + '/locks';
  if (lock) h += '/' + lock.split('/').map(encodeURIComponent).join('/');
  return h;
}

function route() {
  view = parseHash();
  $('forget').hidden = !token();
  $('ns-head').hidden = !view.ns || !!view.sem;
  $('namespace').hidden = !view.ns || !!view.sem || view.locks;
  $('locks-page').hidden = !view.locks;
  $('lock').hidden = !view.lock;
  $('semaphore').hidden = !view.sem;
  $('cluster').hidden = !!view.ns;
  if (view.ns) {
    $('ns-name').textContent = view.ns;
    $('tab-ns').href = href(view.ns);
    $('tab-locks').href = lockHref(view.ns);
    $('tab-ns').className = view.locks ? '' : 'current';
    $('tab-locks').className = view.locks ? 'current' : '';
  }
  stopWatch();
  if (view.sem) startWatch(view.ns, view.sem);
  if (view.lock) startLockWatch(view.ns, view.lock);
  refresh();
}

window.addEventListener('hashchange', route);

async function refresh() {
  clearTimeout(pollTimer);
  try {
    const jobs = [loadCluster(), loadNamespaces()];
    if (view.ns && !view.sem && !view.locks) jobs.push(loadNamespace(view.ns));
    if (view.locks) jobs.push(loadLocks(view.ns));
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

function leaseRows(leases) {
  const byProc = [...leases].sort((a, b) => a.process_id.localeCompare(b.process_id) || a.lease_id.localeCompare(b.lease_id));
  return byProc.map((l) => el('tr', { 'data-lease': l.lease_id },
    el('td', {}, l.process_id), el('td', {}, l.lease_id), el('td', { class: 'num' }, l.ttl_seconds + 's'), el('td', {}, when(l.expires_at))));
}

async function loadNamespace(ns) {
  const proc = $('proc-filter').value.trim();
  const q = proc ? '?process_id=' + encodeURIComponent(proc) : '';
  const base = 'namespaces/' + encodeURIComponent(ns);
  // Each table stands alone: one that fails (say, a leader of an older
  // version that has no locks yet) leaves the others shown.
  const [sems, leases, lockLeases] = await Promise.allSettled([
    api(base + '/semaphores'), api(base + '/leases' + q), api(base + '/lock-leases' + q),
  ]);
  const none = proc ? 'no live lease of this process' : 'no live leases';
  const failed = [];
  const show = (res, tbody, cols, rows, empty) => {
    if (res.status === 'fulfilled') return fill(tbody, rows(res.value), cols, empty);
    if (res.reason instanceof AuthError) throw res.reason;
    failed.push(res.reason.message);
    fill(tbody, [], cols, 'cannot read: ' + res.reason.message);
  };
  show(sems, $('semaphores'), 5, (r) => r.semaphores.map((s) => {
    const used = Number(s.active_holds), permits = Number(s.permits);
    const bar0 = el('td', {}, bar(used, permits));
    return el('tr', { 'data-sem': s.name },
      el('td', {}, el('a', { href: href(ns, s.name) }, s.name)),
      el('td', { class: 'num' }, used + ' / ' + (permits - used) + ' of ' + permits), bar0,
      el('td', { class: 'num' }, s.active_holders_count), el('td', {}, s.description));
  }), 'no semaphores');
  show(leases, $('leases'), 4, (r) => leaseRows(r.leases), none);
  show(lockLeases, $('lock-leases'), 4, (r) => leaseRows(r.leases), none);
  if (failed.length) throw new Error(failed.join('; '));
}

$('proc-filter').addEventListener('input', () => { if (view.ns) loadNamespace(view.ns).catch((e) => showError(e.message)); });

// ---- locks: a tree by path segment (polled, and re-read when the lock
// followed live changes) ----

const MODE = { true: 'exclusive', false: 'shared' };

// lockTree turns held locks (sorted by name) into the rows of a tree: every
// held lock, every segment above one, and the lock followed live (it may be
// unheld, waited for).
function lockTree(locks, extra) {
  const byName = new Map(locks.map((l) => [l.name, l]));
  const names = new Set();
  const add = (name) => {
    const seg = name.split('/');
    for (let i = 1; i <= seg.length; i++) names.add(seg.slice(0, i).join('/'));
  };
  for (const l of locks) add(l.name);
  if (extra) add(extra);
  // Segment order, not string order: "a/b" comes right after "a", before "a-c".
  const sorted = [...names].sort((a, b) => {
    const x = a.split('/'), y = b.split('/');
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
    }
    return x.length - y.length;
  });
  return sorted.map((name) => ({ name, depth: name.split('/').length - 1, lock: byName.get(name) }));
}

function lockCell(ns, node, span) {
  const seg = node.name.split('/').pop();
  const a = el('a', { href: lockHref(ns, node.name), title: node.name, class: node.lock ? '' : 'muted' }, seg);
  const td = el('td', { class: 'tree-name', rowSpan: span }, a);
  td.style.paddingLeft = (0.6 + 1.4 * node.depth) + 'em';
  if (node.lock) td.append(' ', el('span', { class: 'badge ' + (node.lock.state === 'LOCK_STATE_EXCLUSIVE_LOCKED' ? 'excl' : 'shared') }, stateText(node.lock.state)));
  return td;
}

function stateText(st) {
  return { LOCK_STATE_EXCLUSIVE_LOCKED: 'exclusive', LOCK_STATE_SHARED_LOCKED: 'shared' }[st] || 'unlocked';
}

let locksSeq = 0;

async function loadLocks(ns) {
  const seq = ++locksSeq;
  const prefix = $('lock-prefix').value.trim().replace(/^\/+|\/+$/g, '');
  const r = await api('namespaces/' + encodeURIComponent(ns) + '/locks' + (prefix ? '?prefix=' + encodeURIComponent(prefix) : ''));
  if (seq !== locksSeq || ns !== view.ns) return; // a newer read (or page) took over
  const rows = [];
  for (const node of lockTree(r.locks, view.lock)) {
    const cls = node.name === view.lock ? 'current' : '';
    const holders = node.lock ? node.lock.holders : [];
    if (!holders.length) {
      rows.push(el('tr', { 'data-lock': node.name, class: cls + (node.lock ? '' : ' path') }, lockCell(ns, node, 1),
        el('td', { class: 'muted', colSpan: 6 }, node.lock ? 'held by no live lease' : '')));
      continue;
    }
    holders.forEach((h, i) => {
      const tr = el('tr', { 'data-lock': node.name, 'data-lease': h.lease_id, class: cls });
      if (i === 0) tr.append(lockCell(ns, node, holders.length));
      tr.append(el('td', {}, MODE[!!h.exclusive]), el('td', {}, h.process_id), el('td', {}, h.lease_id),
        el('td', { class: 'num' }, h.fencing_token), whenCell(h.locked_at), whenCell(h.expires_at));
      rows.push(tr);
    });
  }
  fill($('locks'), rows, 7, prefix ? 'no lock held under ' + prefix : 'no lock is held');
  $('locks-count').textContent = '(' + r.locks.length + (r.next_pagination_token ? ' shown, the first by name: narrow with a prefix' : '') + ')';
}

let prefixTimer = null;
$('lock-prefix').addEventListener('input', () => {
  clearTimeout(prefixTimer);
  prefixTimer = setTimeout(() => { if (view.locks) loadLocks(view.ns).catch((e) => showError(e.message)); }, 250);
});

// ---- a semaphore or a lock, live ----

let watchError = '';

function stopWatch() {
  if (watchCtl) watchCtl.abort();
  watchCtl = null;
}

function setLive(id, state, text) {
  const b = $(id);
  b.className = 'badge ' + state;
  b.textContent = text;
}

// follow reads a watch's server-sent events until the page leaves it,
// reconnecting after a second when the stream ends or fails (the node's
// watch already resumes across leader changes; this covers the node
// itself going away). on has state(msg), resumed(), absent(msg) and the
// live badge's id.
async function follow(url, what, on) {
  const ctl = new AbortController();
  watchCtl = ctl;
  setLive(on.badge, '', 'connecting');
  while (!ctl.signal.aborted) {
    try {
      const r = await fetch(url, { headers: headers(), signal: ctl.signal, cache: 'no-store' });
      if (r.status === 401 || r.status === 403) {
        askToken(r.status === 403 ? 'This token may not read this ' + what + '.' : 'This cluster requires an access token.');
        setLive(on.badge, 'down', 'no access');
        return;
      }
      if (!r.ok) {
        const body = await r.json();
        if (r.status === 404 && on.absent) {
          on.absent(body);
        } else {
          throw new Error(body.code + ': ' + body.message);
        }
      } else {
        await readEvents(r.body.getReader(), ctl, on);
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
      watchError = e.message;
      showError(e.message);
      setLive(on.badge, 'down', 'reconnecting');
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}

async function readEvents(reader, ctl, on) {
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
        watchError = '';
        showError('');
        setLive(on.badge, 'live', 'live');
        on.state(JSON.parse(data));
      } else if (event === 'resumed') {
        on.resumed();
      } else if (event === 'end') {
        const e = JSON.parse(data);
        throw new Error('watch ended: ' + e.code + ': ' + e.message);
      }
    }
  }
}

function resumedNote() {
  return 'resumed on a new leader at ' + new Date().toISOString().slice(11, 19) + ' UTC';
}

function startWatch(ns, sem) {
  $('sem-ns').textContent = ns;
  $('sem-ns').href = href(ns);
  $('sem-name').textContent = sem;
  let note = '';
  follow('/ui/api/namespaces/' + encodeURIComponent(ns) + '/semaphores/' + encodeURIComponent(sem) + '/watch', 'semaphore', {
    badge: 'live',
    state: (m) => { showState(m, note); note = ''; },
    resumed: () => { note = resumedNote(); },
  });
}

function indexText(m, note) {
  return 'raft index ' + m.raft_index + (Number(m.changes) > 1 ? ' (' + m.changes + ' changes)' : '') + (note ? ', ' + note : '');
}

function showState(m, note) {
  const s = m.semaphore, used = Number(s.active_holds), permits = Number(s.permits);
  $('sem-permits').textContent = used + ' of ' + permits + ' permits used, ' + (permits - used) + ' free';
  $('sem-bar').style.width = (permits > 0 ? Math.min(100, (100 * used) / permits) : 0) + '%';
  $('sem-index').textContent = indexText(m, note);
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

function startLockWatch(ns, lock) {
  // The name as a path: each ancestor links to its own lock.
  const seg = lock.split('/');
  $('lock-name').replaceChildren(...seg.flatMap((s, i) => {
    const part = i === seg.length - 1 ? el('span', {}, s) : el('a', { href: lockHref(ns, seg.slice(0, i + 1).join('/')) }, s);
    return i ? ['/', part] : [part];
  }));
  let note = '', holdersKey = null;
  follow('/ui/api/namespaces/' + encodeURIComponent(ns) + '/lock-watch/' + lock.split('/').map(encodeURIComponent).join('/'), 'lock', {
    badge: 'lock-live',
    state: (m) => {
      showLockState(ns, lock, m, note);
      note = '';
      // The tree shows holders too: re-read it when they change.
      const key = JSON.stringify(m.lock.holders.map((h) => [h.lease_id, h.exclusive, h.fencing_token]));
      if (holdersKey !== null && key !== holdersKey && view.locks) loadLocks(ns).catch((e) => showError(e.message));
      holdersKey = key;
    },
    resumed: () => { note = resumedNote(); },
    absent: (body) => {
      // Not a lock of this namespace (the namespace is gone?): say so in
      // place, and keep trying.
      setLive('lock-live', 'down', 'not found');
      $('lock-state').textContent = body.code + ': ' + body.message;
    },
  });
}

let waitersReading = false;
const WATCH_MAX = 1000;

function showLockState(ns, lock, m, note) {
  const l = m.lock;
  const holders = l.holders || [];
  let line = 'unlocked: nobody holds it';
  if (holders.length) {
    line = stateText(l.state) + ', locked since ' + when(l.locked_at) + ', last activity ' + when(l.last_activity_at);
  }
  $('lock-state').textContent = line;
  $('lock-index').textContent = indexText(m, note);
  $('lock').dataset.index = m.raft_index;
  // A watch message carries at most WATCH_MAX holders (a shared lock may
  // have more), and no count of them.
  $('lock-holders-count').textContent = '(' + (holders.length >= WATCH_MAX ? 'the first ' + holders.length : holders.length) + ')';
  fill($('lock-holders'), holders.map((h) => el('tr', { 'data-process': h.process_id, 'data-lease': h.lease_id, 'data-mode': MODE[!!h.exclusive] },
    el('td', {}, MODE[!!h.exclusive]), el('td', {}, h.process_id), el('td', {}, h.lease_id), el('td', { class: 'num' }, h.fencing_token),
    whenCell(h.locked_at), whenCell(h.expires_at))), 6, 'nobody holds it');
  showLockWaiters(m.waiters, Number(m.waiters_count));
  // A watch message carries the head of a long queue only: read the rest.
  if (m.waiters.length < Number(m.waiters_count) && !waitersReading) {
    waitersReading = true;
    api('namespaces/' + encodeURIComponent(ns) + '/lock-waiters/' + lock.split('/').map(encodeURIComponent).join('/'))
      .then((r) => { if (view.lock === lock) showLockWaiters(r.waiters, Number(m.waiters_count)); })
      .catch((e) => { if (!(e instanceof AuthError)) showError(e.message); })
      .finally(() => { waitersReading = false; });
  }
}

function showLockWaiters(waiters, count) {
  $('lock-waiters-count').textContent = '(' + count + (waiters.length < count ? ', showing ' + waiters.length : '') + ')';
  fill($('lock-waiters'), waiters.map((w) => el('tr', { 'data-process': w.process_id, 'data-lease': w.lease_id, 'data-position': w.position, 'data-mode': MODE[!!w.exclusive] },
    el('td', { class: 'num' }, w.position), el('td', {}, MODE[!!w.exclusive]), el('td', {}, w.upgrade ? 'upgrade' : ''),
    el('td', {}, w.process_id), el('td', {}, w.lease_id), whenCell(w.waiting_since), whenCell(w.deadline))), 7, 'nobody waits');
}

route();
