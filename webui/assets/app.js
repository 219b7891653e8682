// Grackle's web view: plain DOM code, no framework, no build step. It
// reads /ui/api/* (JSON from the public API) and, for the semaphore or
// lock shown, follows its watch (server-sent events, read with fetch so
// the access token can go in a header). Wait groups and barriers have no
// watch: their pages poll every second while visible (see startLive). The
// ACL token the sign-in form takes lives in sessionStorage only (it ends
// with the browser tab) and is sent as Authorization: Bearer, never in a
// URL or a cookie.
'use strict';

const TOKEN_KEY = 'grackle-token';
const POLL_MS = 2000;
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
    askToken(await signInWhy(r, 'this'));
    throw new AuthError('auth');
  }
  const body = await r.json();
  if (!r.ok) {
    const e = new Error(body.code + ': ' + body.message);
    e.status = r.status;
    throw e;
  }
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

// signInWhy is the sign-in prompt for a refused request (401 or 403),
// chosen by the refusal's reason, never by its words. A token the cluster
// does not know (revoked) is dropped from the tab.
async function signInWhy(r, what) {
  let reason = '';
  try { reason = (await r.json()).reason || ''; } catch (e) { /* not JSON: a proxy's page */ }
  if (r.status === 403) return 'This token may not read ' + what + ': sign in with another one.';
  if (reason === 'TOKEN_UNKNOWN') {
    sessionStorage.removeItem(TOKEN_KEY);
    $('forget').hidden = true;
    return 'That token is unknown or was revoked: sign in with another one.';
  }
  return 'This cluster has access control on: sign in with an ACL token.';
}

function askToken(why) {
  $('login-why').textContent = why;
  if ($('login').hidden) {
    $('login').hidden = false;
    $('token').focus();
  }
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

// ---- routing: #/, #/ns/NS, #/ns/NS/sem/SEM, #/ns/NS/locks[/LOCK/NAME],
// #/ns/NS/waitgroups[/WG], #/ns/NS/barriers[/BARRIER] ----

const NO_VIEW = { ns: '', sem: '', locks: false, lock: '', wgs: false, wg: '', bars: false, bar: '' };
let view = { ...NO_VIEW };
let pollTimer = null;
let watchCtl = null;

function parseHash() {
  const p = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const v = { ...NO_VIEW };
  if (p[0] === 'ns' && p[1]) v.ns = p[1];
  if (v.ns && p[2] === 'waitgroups') { v.wgs = true; v.wg = p[3] || ''; }
  if (v.ns && p[2] === 'barriers') { v.bars = true; v.bar = p[3] || ''; }
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

function wgHref(ns, wg) {
  return '#/ns/' + encodeURIComponent(ns) + '/waitgroups' + (wg ? '/' + encodeURIComponent(wg) : '');
}

function barHref(ns, bar) {
  return '#/ns/' + encodeURIComponent(ns) + '/barriers' + (bar ? '/' + encodeURIComponent(bar) : '');
}

function route() {
  const was = view;
  view = parseHash();
  if (was.ns !== view.ns) { resetPager(pg.wgs); resetPager(pg.bars); }
  if (was.ns !== view.ns || was.wg !== view.wg) { resetPager(pg.jobs); wgJobsKey = ''; }
  if (was.ns !== view.ns || was.bar !== view.bar) { resetPager(pg.cur); resetPager(pg.prev); barKey = ''; barGen = ''; }
  $('forget').hidden = !token();
  $('ns-head').hidden = !view.ns || !!view.sem;
  $('namespace').hidden = !view.ns || !!view.sem || view.locks || view.wgs || view.bars;
  $('locks-page').hidden = !view.locks;
  $('waitgroups-page').hidden = !view.wgs;
  $('waitgroup').hidden = !view.wg;
  $('barriers-page').hidden = !view.bars;
  $('barrier').hidden = !view.bar;
  $('lock').hidden = !view.lock;
  $('semaphore').hidden = !view.sem;
  $('cluster').hidden = !!view.ns;
  if (view.ns) {
    $('ns-name').textContent = view.ns;
    $('tab-ns').href = href(view.ns);
    $('tab-locks').href = lockHref(view.ns);
    $('tab-wgs').href = wgHref(view.ns);
    $('tab-bars').href = barHref(view.ns);
    $('tab-ns').className = view.locks || view.wgs || view.bars ? '' : 'current';
    $('tab-locks').className = view.locks ? 'current' : '';
    $('tab-wgs').className = view.wgs ? 'current' : '';
    $('tab-bars').className = view.bars ? 'current' : '';
  }
  stopWatch();
  if (view.sem) startWatch(view.ns, view.sem);
  if (view.lock) startLockWatch(view.ns, view.lock);
  refresh();
  startLive();
}

window.addEventListener('hashchange', route);

async function refresh() {
  clearTimeout(pollTimer);
  try {
    const jobs = [loadCluster(), loadNamespaces()];
    if (view.ns && !view.sem && !view.locks && !view.wgs && !view.bars) jobs.push(loadNamespace(view.ns));
    if (view.locks) jobs.push(loadLocks(view.ns));
    await Promise.all(jobs);
    if (!watchError) showError('');
  } catch (e) {
    if (!(e instanceof AuthError)) showError(e.message);
  }
  pollTimer = setTimeout(refresh, POLL_MS);
}

// ---- cluster, namespaces, semaphores, leases (polled) ----

// Each member's health is the answering node's (the leader's, as the
// view's client asks it): whether its probes get an answer, and, from the
// leader, when the member last answered its Raft heartbeats and how many
// entries it lacks. An unreachable member is a red row and a banner.
async function loadCluster() {
  const st = await api('cluster');
  $('leader').textContent = st.leader_id ? 'leader: ' + st.leader_id + ' (' + st.leader_address + '), term ' + st.term : 'no leader known';
  $('leader').dataset.leader = st.leader_id || '';
  const ms = (v) => human(Number(v) / 1000);
  const down = st.members.filter((m) => m.reachability === 'unreachable');
  fill($('members'), st.members.map((m) => {
    const unreachable = m.reachability === 'unreachable';
    const state = unreachable
      ? el('td', {}, el('span', { class: 'badge down' }, 'unreachable'), m.last_seen_ms !== undefined ? ' silent ' + ms(m.last_seen_ms) : ' never answered')
      : el('td', {}, m.raft_state || m.state);
    let contact = '-';
    if (unreachable && m.replication_contact_ms !== undefined) contact = ms(m.replication_contact_ms) + ' ago';
    else if (!unreachable && m.last_contact_ms !== '-1' && m.state !== 'leader') contact = m.last_contact_ms + ' ms';
    return el('tr', { 'data-node': m.node_id, 'data-reachability': m.reachability || 'unknown', class: unreachable ? 'down' : '' },
      el('td', {}, m.node_id + (m.node_id === st.leader_id ? ' ★' : '')), el('td', {}, m.grpc_address), el('td', {}, m.raft_address),
      state, el('td', {}, m.suffrage), el('td', { class: 'num' }, contact),
      el('td', { class: 'num' }, m.replication_lag_entries !== undefined ? m.replication_lag_entries : '-'),
      el('td', {}, m.version || '-'));
  }), 8, 'no members');
  const banner = $('members-alert');
  if (down.length) {
    const voters = st.members.filter((m) => m.suffrage === 'voter');
    const up = voters.filter((m) => m.reachability === 'self' || m.reachability === 'reachable').length;
    const quorum = Math.floor(voters.length / 2) + 1;
    const risk = up < quorum ? 'the quorum is lost' : up === quorum ? 'one more failure loses the quorum' : (up - quorum) + ' more may fail';
    banner.textContent = 'Unreachable: ' + down.map((m) => m.node_id).join(', ') + ' (as ' + (st.members.find((m) => m.reachability === 'self') || {}).node_id +
      ' sees it). ' + up + ' of ' + voters.length + ' voters reachable: ' + risk + '.';
  }
  banner.hidden = !down.length;
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
        askToken(await signInWhy(r, 'this ' + what));
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

// ---- wait groups and barriers (polled) ----

// Their pages are live by polling, as there is no watch RPC for them:
// while one is shown and the browser tab is visible, the page asks every
// LIVE_MS for the table (one List call, one API page of at most PAGE
// items), and re-reads the picked item's jobs or participants only when
// its counts changed (plus a Get when it is not on the page listed). A
// hidden tab stops polling; showing it again resumes at once.
const LIVE_MS = 1000;
// ?page_size=N (1..250) in the page's address changes the page size.
const PAGE = Math.min(250, Math.max(1, Math.floor(Number(new URLSearchParams(location.search).get('page_size'))) || 100));
let liveSeq = 0;
let liveTimer = null;

function startLive() {
  const my = ++liveSeq;
  clearTimeout(liveTimer);
  const live = () => my === liveSeq;
  const tick = async () => {
    if (!live() || !(view.wgs || view.bars) || document.visibilityState !== 'visible') return;
    try {
      if (view.wgs) await loadWaitGroups(view.ns, live);
      else await loadBarriers(view.ns, live);
      if (live() && !watchError) showError('');
    } catch (e) {
      if (live() && !(e instanceof AuthError)) showError(e.message);
    }
    if (live()) liveTimer = setTimeout(tick, LIVE_MS);
  };
  tick();
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') startLive();
});

// A pager follows a list's page tokens; offset counts the items before
// the page shown (for positions and "showing 101-200").
function newPager(prefix) {
  const p = { tok: '', offset: 0, next: '', prev: '', count: 0, prevBtn: $(prefix + '-prev'), nextBtn: $(prefix + '-next') };
  p.nextBtn.addEventListener('click', () => {
    if (!p.next) return;
    p.offset += p.count;
    p.tok = p.next;
    startLive();
  });
  p.prevBtn.addEventListener('click', () => {
    p.offset = Math.max(0, p.offset - PAGE);
    p.tok = p.offset === 0 ? '' : p.prev;
    startLive();
  });
  return p;
}

function resetPager(p) {
  p.tok = '';
  p.offset = 0;
}

function pageQuery(p, extra) {
  const q = new URLSearchParams(extra || {});
  q.set('limit', PAGE);
  if (p.tok) q.set('page_token', p.tok);
  return '?' + q;
}

function showPager(p, r, n) {
  p.next = r.next_pagination_token || '';
  p.prev = r.previous_pagination_token || '';
  p.count = n;
  p.nextBtn.hidden = !p.next;
  p.prevBtn.hidden = p.offset === 0 && !p.tok;
  p.nextBtn.parentElement.hidden = p.nextBtn.hidden && p.prevBtn.hidden;
}

function countText(p, n, total) {
  const of = total !== undefined ? ' of ' + total : '';
  if (p.offset === 0 && !p.next) return '(' + n + of + ')';
  return '(' + (n ? (p.offset + 1) + '-' + (p.offset + n) : 'none') + of + ' shown)';
}

const pg = {
  wgs: newPager('wgs'), jobs: newPager('wg-jobs'),
  bars: newPager('bars'), cur: newPager('bar-cur'), prev: newPager('bar-prev'),
};

function nsMs(ns) { return Number(BigInt(ns) / 1000000n); }

// dur is a duration to the second (a progress page counts down).
function dur(s) {
  s = Math.max(0, Math.round(s));
  const two = (n) => String(n).padStart(2, '0');
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + two(s % 60) + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + two(Math.floor((s % 3600) / 60)) + 'm';
  return Math.floor(s / 86400) + 'd ' + two(Math.floor((s % 86400) / 3600)) + 'h';
}

function progressBar(done, of, cls, wide) {
  const f = el('span', { class: cls || '' });
  f.style.width = (of > 0 ? Math.min(100, (100 * done) / of) : 0) + '%';
  return el('span', { class: 'bar' + (wide ? ' wide' : '') }, f);
}

function setBar(id, done, of, cls) {
  $(id).className = cls || '';
  $(id).style.width = (of > 0 ? Math.min(100, (100 * done) / of) : 0) + '%';
}

function metaText(m) {
  return Object.entries(m || {}).sort().map(([k, v]) => k + '=' + v).join(', ');
}

const WG_STATUS = { WAIT_GROUP_STATUS_ACTIVE: 'active', WAIT_GROUP_STATUS_COMPLETED: 'completed', WAIT_GROUP_STATUS_EXPIRED: 'expired' };

function wgStatus(g) { return WG_STATUS[g.status] || 'unknown'; }

// timeLeft: until expires_at while active, else since finished_at.
function timeLeft(g) {
  const st = wgStatus(g);
  if (st !== 'active') return (g.finished_at && g.finished_at !== '0' ? st + ' ' + dur((Date.now() - nsMs(g.finished_at)) / 1000) + ' ago' : st);
  if (!g.expires_at || g.expires_at === '0') return 'no expiry';
  const left = (nsMs(g.expires_at) - Date.now()) / 1000;
  return left > 0 ? dur(left) + ' left' : 'expiring';
}

// fillLive is fill for the tables polled every second: a row whose key
// attribute is unchanged keeps its element, and so does each cell of it
// that did not change (the link being clicked, a text selection, the
// mouse's hover survive a refresh); the rest is replaced.
function fillLive(tbody, rows, cols, emptyText, key) {
  if (!rows.length) return fill(tbody, rows, cols, emptyText);
  const old = [...tbody.children];
  const out = rows.map((r, i) => {
    const o = old[i];
    if (!o || !r.hasAttribute(key) || o.getAttribute(key) !== r.getAttribute(key) || o.cells.length !== r.cells.length) return r;
    for (const a of [...o.attributes]) if (!r.hasAttribute(a.name)) o.removeAttribute(a.name);
    for (const a of [...r.attributes]) if (o.getAttribute(a.name) !== a.value) o.setAttribute(a.name, a.value);
    [...r.cells].forEach((c, j) => { if (o.cells[j].outerHTML !== c.outerHTML) o.cells[j].replaceWith(c); });
    return o;
  });
  if (out.length !== old.length || out.some((r, i) => r !== old[i])) tbody.replaceChildren(...out);
}

function pct(done, of) { return of > 0 ? Math.floor((100 * done) / of) : 0; }

let wgJobsKey = '';

async function loadWaitGroups(ns, live) {
  const base = 'namespaces/' + encodeURIComponent(ns);
  const r = await api(base + '/wait-groups' + pageQuery(pg.wgs));
  if (!live()) return;
  fillLive($('waitgroups'), r.wait_groups.map((g) => {
    const st = wgStatus(g), done = Number(g.completed_jobs), of = Number(g.counter);
    return el('tr', { 'data-wg': g.name, 'data-status': st, 'data-completed': g.completed_jobs, class: g.name === view.wg ? 'current' : '' },
      el('td', {}, el('a', { href: wgHref(ns, g.name), class: 'row' }, g.name)),
      el('td', { class: 'num' }, done + ' / ' + of + ' (' + pct(done, of) + '%)'),
      el('td', {}, progressBar(done, of, st === 'completed' ? 'done' : st === 'expired' ? 'expired' : '')),
      el('td', {}, el('span', { class: 'badge ' + st }, st)),
      el('td', { title: g.expires_at !== '0' ? 'expires_at ' + when(g.expires_at) : '' }, timeLeft(g)),
      el('td', {}, g.description));
  }), 6, 'no wait groups', 'data-wg');
  showPager(pg.wgs, r, r.wait_groups.length);
  $('wgs-count').textContent = countText(pg.wgs, r.wait_groups.length);
  if (!view.wg) return;
  let g = r.wait_groups.find((x) => x.name === view.wg);
  if (!g) {
    try {
      g = (await api(base + '/wait-groups/' + encodeURIComponent(view.wg))).wait_group;
    } catch (e) {
      if (e.status !== 404) throw e;
      if (live()) showWaitGroupMissing(e.message);
      return;
    }
    if (!live()) return;
  }
  showWaitGroup(g);
  // The jobs change only with completed_jobs: re-read them then.
  const key = [ns, g.name, g.created_at, g.completed_jobs, pg.jobs.tok].join('\n');
  if (key === wgJobsKey) return;
  const j = await api(base + '/wait-groups/' + encodeURIComponent(g.name) + '/jobs' + pageQuery(pg.jobs));
  if (!live()) return;
  wgJobsKey = key;
  fillLive($('wg-jobs'), j.jobs.map((x) => el('tr', { 'data-job': x.job_id },
    el('td', {}, x.job_id), whenCell(x.completed_at), el('td', { class: 'meta' }, metaText(x.metadata)))), 3, 'no job completed yet', 'data-job');
  showPager(pg.jobs, j, j.jobs.length);
  $('wg-jobs-count').textContent = countText(pg.jobs, j.jobs.length, g.completed_jobs);
}

function showWaitGroup(g) {
  const st = wgStatus(g), done = Number(g.completed_jobs), of = Number(g.counter);
  $('wg-name').textContent = g.name;
  $('wg-status').className = 'badge ' + st;
  $('wg-status').textContent = st;
  setBar('wg-bar', done, of, st === 'completed' ? 'done' : st === 'expired' ? 'expired' : '');
  $('wg-progress').textContent = done + ' of ' + of + ' jobs done (' + pct(done, of) + '%)' +
    (st === 'active' ? ', ' + (of - done) + ' to go, ' + timeLeft(g) : ', ' + timeLeft(g));
  const t = ['created ' + when(g.created_at)];
  t.push(g.expires_at !== '0' ? 'expires_at ' + when(g.expires_at) : 'never expires');
  if (g.finished_at !== '0') t.push('finished ' + when(g.finished_at));
  if (g.delete_after_finished_seconds !== '0') t.push('deleted ' + dur(Number(g.delete_after_finished_seconds)) + ' after it finishes');
  const md = metaText(g.metadata);
  if (md) t.push('metadata ' + md);
  $('wg-times').textContent = t.join(', ');
  $('wg-desc').textContent = g.description;
  $('waitgroup').dataset.status = st;
  $('waitgroup').dataset.completed = g.completed_jobs;
}

function showWaitGroupMissing(msg) {
  $('wg-name').textContent = view.wg;
  $('wg-status').className = 'badge down';
  $('wg-status').textContent = 'not found';
  setBar('wg-bar', 0, 0);
  $('wg-progress').textContent = msg;
  $('wg-times').textContent = '';
  $('wg-desc').textContent = '';
  fill($('wg-jobs'), [], 3, 'no such wait group');
  wgJobsKey = '';
}

let barKey = '';
let barGen = '';

async function loadBarriers(ns, live) {
  const base = 'namespaces/' + encodeURIComponent(ns);
  const r = await api(base + '/barriers' + pageQuery(pg.bars));
  if (!live()) return;
  fillLive($('barriers'), r.barriers.map((b) => {
    const n = Number(b.arrived_processes), of = Number(b.expected_processes);
    return el('tr', { 'data-bar': b.name, 'data-generation': b.generation, 'data-arrived': b.arrived_processes, class: b.name === view.bar ? 'current' : '' },
      el('td', {}, el('a', { href: barHref(ns, b.name), class: 'row' }, b.name)),
      el('td', { class: 'num' }, b.generation),
      el('td', { class: 'num' }, n + ' / ' + of),
      el('td', {}, progressBar(n, of)),
      whenCell(b.last_activity_at),
      el('td', {}, b.description));
  }), 6, 'no barriers', 'data-bar');
  showPager(pg.bars, r, r.barriers.length);
  $('bars-count').textContent = countText(pg.bars, r.barriers.length);
  if (!view.bar) return;
  let b = r.barriers.find((x) => x.name === view.bar);
  if (!b) {
    try {
      b = (await api(base + '/barriers/' + encodeURIComponent(view.bar))).barrier;
    } catch (e) {
      if (e.status !== 404) throw e;
      if (live()) showBarrierMissing(e.message);
      return;
    }
    if (!live()) return;
  }
  showBarrier(b);
  // A new generation: the pages followed belong to older ones.
  const genKey = b.created_at + '/' + b.generation;
  if (genKey !== barGen) { resetPager(pg.cur); resetPager(pg.prev); barGen = genKey; }
  // The participants change only with the arrivals or the generation.
  const key = [ns, b.name, genKey, b.arrived_processes, pg.cur.tok, pg.prev.tok].join('\n');
  if (key === barKey) return;
  const url = base + '/barriers/' + encodeURIComponent(b.name) + '/participants';
  const cur = await api(url + pageQuery(pg.cur, { generation: 0 }));
  if (!live()) return;
  const g = Number(cur.generation);
  $('bar-cur-gen').textContent = g;
  fillLive($('bar-current'), participantRows(cur.participants, pg.cur.offset), 4, 'nobody has arrived yet', 'data-process');
  showPager(pg.cur, cur, cur.participants.length);
  $('bar-cur-count').textContent = countText(pg.cur, cur.participants.length);
  $('bar-prev-gen').textContent = g > 1 ? g - 1 : '-';
  if (g > 1) {
    try {
      const prev = await api(url + pageQuery(pg.prev, { generation: g - 1 }));
      if (!live()) return;
      fillLive($('bar-previous'), participantRows(prev.participants, pg.prev.offset), 4, 'nobody arrived (tripped by an update)', 'data-process');
      showPager(pg.prev, prev, prev.participants.length);
      $('bar-prev-count').textContent = countText(pg.prev, prev.participants.length);
    } catch (e) {
      // It tripped again between the two reads: no longer kept. The next
      // poll reads the new pair.
      if (e.status !== 409) throw e;
      if (!live()) return;
      fill($('bar-previous'), [], 4, 'no longer kept');
      barKey = '';
      return;
    }
  } else {
    fill($('bar-previous'), [], 4, 'none: this is the first generation');
    showPager(pg.prev, {}, 0);
    $('bar-prev-count').textContent = '';
  }
  barKey = key;
}

function participantRows(ps, offset) {
  return ps.map((p, i) => el('tr', { 'data-process': p.process_id, 'data-position': offset + i + 1 },
    el('td', { class: 'num' }, offset + i + 1), el('td', {}, p.process_id), whenCell(p.arrived_at), el('td', { class: 'meta' }, metaText(p.metadata))));
}

function showBarrier(b) {
  const n = Number(b.arrived_processes), of = Number(b.expected_processes);
  $('bar-name').textContent = b.name;
  $('bar-gen').textContent = 'generation ' + b.generation;
  setBar('bar-bar', n, of);
  $('bar-progress').textContent = n + ' of ' + of + ' processes arrived at generation ' + b.generation + ', ' + (of - n) + ' to go' +
    (Number(b.generation) > 1 ? ' (tripped ' + (Number(b.generation) - 1) + (b.generation === '2' ? ' time)' : ' times)') : '');
  const t = ['created ' + when(b.created_at), 'last arrival or creation ' + when(b.last_activity_at)];
  if (b.delete_inactive_after_seconds !== '0') t.push('deleted after ' + dur(Number(b.delete_inactive_after_seconds)) + ' without activity');
  const md = metaText(b.metadata);
  if (md) t.push('metadata ' + md);
  $('bar-times').textContent = t.join(', ');
  $('bar-desc').textContent = b.description;
  $('barrier').dataset.generation = b.generation;
  $('barrier').dataset.arrived = b.arrived_processes;
}

function showBarrierMissing(msg) {
  $('bar-name').textContent = view.bar;
  $('bar-gen').textContent = 'not found';
  setBar('bar-bar', 0, 0);
  $('bar-progress').textContent = msg;
  $('bar-times').textContent = '';
  $('bar-desc').textContent = '';
  fill($('bar-current'), [], 4, 'no such barrier');
  fill($('bar-previous'), [], 4, 'no such barrier');
  barKey = '';
  barGen = '';
}

route();
