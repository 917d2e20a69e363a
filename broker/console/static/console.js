// Gregor console: a hash-routed single page over the admin JSON API (/v1/...).
// Every server-provided string reaches the page through textContent/createElement, never innerHTML.
'use strict';

const TOKEN_KEY = 'gregor.token';
const CONFIGS_KEY = 'gregor.configs';
const REFRESH_MS = 5000;
const DEFAULT_LIMIT = 50;
const SVG_NS = 'http://www.w3.org/2000/svg';
const app = document.getElementById('app');

let navGen = 0;            // bumped on every page change; stale async work checks it and stops
let refreshTimer = null;   // the overview's 5 s refresh
let current = {};          // the rendered route: {route, name}
let pendingScroll = null;  // section id to scroll to once the overview is rendered

// ---------- small helpers ----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') node.textContent = String(v);
    else if (k === 'class') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k in node && typeof v !== 'string') node[k] = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

const numFmt = new Intl.NumberFormat('en-US');
const rateFmt = new Intl.NumberFormat('en-US', {maximumFractionDigits: 1});
function fmtNum(n) { return n === null || n === undefined ? '—' : numFmt.format(n); }
function fmtRate(n) { return n === null || n === undefined ? '—' : rateFmt.format(n); }

function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return i === 0 ? `${Math.round(n)} B` : `${n.toFixed(1)} ${units[i]}`;
}

function fmtTime(ms) {
  if (ms === null || ms === undefined || ms < 0) return '—';
  const d = new Date(ms);
  return isNaN(d) ? String(ms) : d.toISOString();
}

function fmtSpan(seconds) {
  return seconds < 120 ? `last ${Math.round(seconds)} s` : `last ${Math.round(seconds / 60)} min`;
}

function topicLink(name) { return el('a', {href: '#/topics/' + encodeURIComponent(name), text: name}); }
function groupLink(name) { return el('a', {href: '#/groups/' + encodeURIComponent(name), text: name}); }
function ids(list) { return (list || []).join(', '); }
function idList(list) { return el('span', {class: 'nowrap', text: ids(list)}); }

// ISO 8601 (a zoneless one is taken as UTC, like every time on this page) or epoch ms -> canonical string.
function normalizeTime(value) {
  const v = value.trim();
  if (/^\d+$/.test(v)) return v;
  const zoneless = /^\d{4}-\d\d-\d\d(T\d\d:\d\d(:\d\d(\.\d+)?)?)?$/.test(v);
  const d = new Date(zoneless ? (v.includes('T') ? v + 'Z' : v + 'T00:00:00Z') : v);
  if (isNaN(d)) throw new Error(`"${v}" is not a date-time: use e.g. 2026-12-04T08:00:00Z`);
  return d.toISOString().replace('.000Z', 'Z');
}

function setLoaded(name) { document.body.dataset.loaded = name; }

// ---------- error / notice boxes ----------

let errorKind = null;
function showError(message, kind = 'action') {
  const box = document.getElementById('error');
  box.textContent = message;
  box.hidden = false;
  errorKind = kind;
}
function clearError(kind) {
  if (kind && errorKind !== kind) return;
  const box = document.getElementById('error');
  box.textContent = '';
  box.hidden = true;
  errorKind = null;
}
let flashFresh = false;   // a flash survives the one navigation that follows it
function flash(message) {
  flashFresh = Boolean(message);
  const box = document.getElementById('flash');
  box.textContent = message || '';
  box.hidden = !message;
}

// ---------- API access: bearer token, 401 -> token form, JSON errors ----------

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

let tokenWait = null;
function askToken(message) {
  if (tokenWait) return tokenWait;
  const form = document.getElementById('token-form');
  document.getElementById('token-message').textContent = message ? ` (${message})` : '';
  form.hidden = false;
  form.elements.token.value = '';
  form.elements.token.focus();
  tokenWait = new Promise(resolve => {
    form.onsubmit = ev => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, form.elements.token.value);
      form.hidden = true;
      tokenWait = null;
      resolve();
    };
  });
  return tokenWait;
}

async function api(path, method = 'GET', body = undefined) {
  for (;;) {
    const headers = {Accept: 'application/json'};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = 'Bearer ' + token;
    const init = {method, headers, cache: 'no-store'};
    if (method !== 'GET') {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body === undefined ? {} : body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'the broker did not answer');
    }
    let data = null;
    try { data = await resp.json(); } catch (e) { /* not JSON */ }
    const message = data && typeof data.error === 'string' ? data.error : `HTTP ${resp.status} ${resp.statusText}`;
    if (resp.status === 401) {
      await askToken(token ? 'that token was refused: ' + message : message);
      continue;
    }
    if (!resp.ok) throw new ApiError(resp.status, message);
    return data;
  }
}

// ---------- tables and charts ----------

// columns: [label, 'num'?]; rowFn(item) -> {cells: [...], attrs?} or an array of cells.
// A cell is a <td>, a number (formatted, right-aligned) or anything el() accepts.
function table(id, columns, items, rowFn, emptyText = 'None.') {
  const thead = el('thead', {}, el('tr', {}, columns.map(([label, cls]) => el('th', {class: cls, text: label}))));
  const tbody = el('tbody');
  for (const item of items) {
    const row = rowFn(item);
    const {cells, attrs} = Array.isArray(row) ? {cells: row} : row;
    tbody.appendChild(el('tr', attrs, cells.map(c => {
      if (c instanceof HTMLTableCellElement) return c;
      if (typeof c === 'number') return el('td', {class: 'num', text: fmtNum(c)});
      return el('td', {}, c);
    })));
  }
  if (!items.length) tbody.appendChild(el('tr', {class: 'empty'}, el('td', {colspan: columns.length, text: emptyText})));
  return el('div', {class: 'table-wrap'}, el('table', {id}, thead, tbody));
}

function numCell(value, text, cls = '') {
  return el('td', {class: ('num ' + cls).trim(), text: text === undefined ? fmtNum(value) : text,
                   dataset: value === null || value === undefined ? {} : {value: String(value)}});
}

// A hand-drawn line chart of samples[i][field] (oldest first); format() prints values.
function lineChart(id, title, samples, field, format, intervalS, unit = '') {
  const W = 360, H = 120, L = 56, R = 8, T = 10, B = 22;
  const values = samples.map(s => Number(s[field]) || 0);
  const latest = values.length ? format(values[values.length - 1]) + unit : '—';
  const head = el('div', {class: 'chart-head'}, el('span', {text: title}),
                  el('strong', {class: 'chart-latest', text: latest}));
  const box = el('figure', {class: 'chart', id}, head);
  if (!values.length) return append(box, [el('p', {class: 'muted', text: 'No samples yet.'})]);
  const max = Math.max(...values, 0) || 1;
  const x = i => L + (values.length === 1 ? (W - L - R) : i * (W - L - R) / (values.length - 1));
  const y = v => T + (H - T - B) * (1 - v / max);
  const spanS = samples.length > 1 ? (samples[samples.length - 1].t - samples[0].t) / 1000 : (intervalS || 0);
  const chart = svg('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `${title}: ${latest}`});
  chart.append(
    svg('line', {x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis'}),
    svg('line', {x1: L, y1: T, x2: L, y2: H - B, class: 'axis'}),
    svg('text', {x: L - 4, y: T + 4, 'text-anchor': 'end', class: 'tick'}, format(max)),
    svg('text', {x: L - 4, y: H - B, 'text-anchor': 'end', class: 'tick'}, '0'),
    svg('text', {x: L, y: H - 6, class: 'tick'}, fmtSpan(spanS)),
    svg('text', {x: W - R, y: H - 6, 'text-anchor': 'end', class: 'tick'}, 'now'));
  const points = values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
  if (values.length === 1) chart.append(svg('circle', {cx: x(0), cy: y(values[0]), r: 3, class: 'dot'}));
  else chart.append(svg('polyline', {points, class: 'line'}));
  return append(box, [chart]);
}

function section(id, title, ...children) {
  return el('section', {id, class: 'card'}, el('h2', {text: title}), children);
}

function formResult(node, message, isError) {
  node.replaceChildren(el('p', {class: isError ? 'error-text' : 'ok-text', text: message}));
}

// ---------- overview ----------

function renderOverview(gen) {
  const viewForm = el('form', {id: 'view-form', class: 'inline-form'},
    el('label', {}, 'Name ', el('input', {name: 'name', required: true, placeholder: 'orders-eu'})),
    el('label', {}, 'Source topic ', el('input', {name: 'source', required: true, list: 'topic-names'})),
    el('label', {}, 'Tags ', el('input', {name: 'tags', required: true, placeholder: 'eu, uk'})),
    el('datalist', {id: 'topic-names'}),
    el('button', {type: 'submit', text: 'Create view'}));
  const viewResult = el('div', {id: 'view-result'});
  viewForm.addEventListener('submit', async ev => {
    ev.preventDefault();
    const f = viewForm.elements;
    const tags = f.tags.value.split(',').map(t => t.trim()).filter(Boolean);
    try {
      const res = await api('v1/views', 'POST', {name: f.name.value.trim(), source: f.source.value.trim(), tags});
      formResult(viewResult, `Created view ${res && res.created ? res.created : f.name.value}.`, false);
      viewForm.reset();
      refreshOverview(gen);
    } catch (e) {
      formResult(viewResult, e.message, true);
      showError(e.message);
    }
  });
  const loading = () => el('p', {class: 'muted', text: 'Loading…'});
  const parts = {
    charts: el('div', {class: 'charts'}, loading()),
    brokers: el('div', {}, loading()), brokerGroups: el('div', {id: 'broker-groups', class: 'broker-groups'}),
    topics: el('div', {}, loading()), groups: el('div', {}, loading()),
  };
  app.replaceChildren(
    el('h1', {text: 'Overview'}),
    section('rates-section', 'Throughput', parts.charts),
    section('brokers-section', 'Brokers', parts.brokers, parts.brokerGroups),
    section('topics-section', 'Topics', parts.topics,
            el('h3', {text: 'Create a view (a tag-filtered topic)'}), viewForm, viewResult),
    section('groups-section', 'Consumer groups', parts.groups));
  overviewParts = parts;
  refreshOverview(gen);
}

let overviewParts = null;
async function refreshOverview(gen) {
  clearTimeout(refreshTimer);
  setLoaded('');
  try {
    const data = await api('v1/overview');
    if (gen !== navGen) return;
    clearError('refresh');
    fillOverview(data, overviewParts);
  } catch (e) {
    if (gen !== navGen) return;
    showError(e.status === 0 ? `Error: the broker did not answer (retrying every ${REFRESH_MS / 1000} s).`
                             : `Could not load the overview: ${e.message}`, 'refresh');
  }
  setLoaded('overview');
  if (pendingScroll) { document.getElementById(pendingScroll)?.scrollIntoView(); pendingScroll = null; }
  refreshTimer = setTimeout(() => { if (gen === navGen) refreshOverview(gen); }, REFRESH_MS);
}

function fillOverview(data, parts) {
  const node = data.node || {};
  document.getElementById('node-info').textContent =
    `node ${node.id ?? '?'} · cluster ${node.cluster_id ?? '?'}${node.clustered ? ' · clustered' : ''}`;
  const samples = (data.rates && data.rates.samples) || [];
  const interval = data.rates && data.rates.interval_s;
  parts.charts.replaceChildren(
    lineChart('chart-messages-in', 'Messages in per second', samples, 'messages_in', fmtRate, interval),
    lineChart('chart-bytes-out', 'Bytes out per second', samples, 'bytes_out', fmtBytes, interval, '/s'));
  parts.brokers.replaceChildren(table('brokers-table', [['Id', 'num'], ['Host'], ['Port', 'num'], ['Rack']],
    data.brokers || [], b => ({attrs: {dataset: {broker: String(b.id)}},
      cells: [b.id, el('span', {}, b.host, b.id === node.id ? el('span', {class: 'badge', text: 'this node'}) : null),
              numCell(b.port, String(b.port)), b.rack ?? '—']})));
  parts.brokerGroups.replaceChildren(...(data.broker_groups || []).map(brokerGroupCard));
  const topics = data.topics || [];
  parts.topics.replaceChildren(table('topics-table',
    [['Name'], ['Partitions', 'num'], ['Messages', 'num'], ['Size', 'num'], ['View of']], topics,
    t => ({attrs: {dataset: {topic: t.name}},
      cells: [topicLink(t.name), t.partitions, t.messages, numCell(t.bytes, fmtBytes(t.bytes)),
              t.view_of ? el('span', {}, 'view of ', topicLink(t.view_of)) : '']}), 'No topics yet.'));
  const list = document.getElementById('topic-names');
  if (list) list.replaceChildren(...topics.filter(t => !t.view_of).map(t => el('option', {value: t.name})));
  parts.groups.replaceChildren(table('groups-table',
    [['Name'], ['State'], ['Members', 'num'], ['Total lag', 'num']], data.groups || [],
    g => ({attrs: {dataset: {group: g.name}},
      cells: [groupLink(g.name), g.state, g.members, numCell(g.lag, undefined, 'lag')]}), 'No consumer groups.'));
}

function brokerGroupCard(g) {
  const leaderless = g.leaderless === true || g.master === -1 || g.master === null;
  const live = new Set(g.live || []);
  const nodes = (g.nodes || []).map(n => el('span', {class: live.has(n) ? 'node' : 'node down',
    title: live.has(n) ? 'live' : 'not live', text: live.has(n) ? String(n) : `${n} (down)`}));
  const followers = table(null, [['Follower', 'num'], ['Lag', 'num']], g.followers || [],
    f => [f.id, numCell(f.lag_bytes, fmtBytes(f.lag_bytes))], 'No followers.');
  return el('div', {class: leaderless ? 'group-card leaderless' : 'group-card', dataset: {group: g.name}},
    el('h3', {}, 'Broker group ', el('span', {text: g.name}),
       leaderless ? el('span', {class: 'badge danger', text: 'leaderless'}) : null),
    el('dl', {},
      el('dt', {text: 'Nodes'}), el('dd', {}, nodes),
      el('dt', {text: 'Master'}), el('dd', {class: 'master',
        text: leaderless ? `none (epoch ${g.epoch ?? '?'})` : `${g.master} (epoch ${g.epoch ?? '?'})`}),
      el('dt', {text: 'Sync state'}), el('dd', {text: `{${ids(g.sync_state)}}`})),
    followers);
}

// ---------- topic page ----------

const BROWSE_KEYS = ['msg_id', 'key', 'from', 'offset', 'partition', 'tag', 'limit'];
const MODES = [['newest', 'newest'], ['from', 'from time'], ['offset', 'from offset'],
               ['key', 'by key'], ['msg_id', 'by message id']];
const PLACEHOLDERS = {newest: '(not used)', from: '2026-12-04T08:00:00Z or epoch ms', offset: 'offset, e.g. 0',
                      key: 'key, e.g. alice', msg_id: 'message id'};

function modeOf(query) {
  for (const m of ['msg_id', 'key', 'from', 'offset']) if (query.has(m)) return m;
  return 'newest';
}

function renderTopic(gen, name, query) {
  const del = el('button', {type: 'button', id: 'delete-topic', class: 'danger', text: 'Delete topic'});
  del.addEventListener('click', async () => {
    if (!confirm(`Delete topic "${name}" and all its messages?`)) return;
    try {
      const res = await api('v1/topics/' + encodeURIComponent(name) + '/delete', 'POST', {});
      flash(`Deleted topic ${res && res.deleted ? res.deleted : name}.`);
      location.hash = '#/';
    } catch (e) { showError(`Could not delete the topic: ${e.message}`); }
  });
  const form = browseForm(name);
  const parts = {info: el('div', {class: 'subtitle'}), partitions: el('div'), configs: el('div'),
                 notices: el('div', {id: 'messages-notices'}), messages: el('div'), form};
  app.replaceChildren(
    el('div', {class: 'title-row'}, el('h1', {}, 'Topic ', el('span', {class: 'name', text: name})), del),
    parts.info,
    section('partitions-section', 'Partitions', parts.partitions),
    configsBox(parts),
    section('messages-section', 'Messages', form, parts.notices, parts.messages));
  topicParts = parts;
  setLoaded('');
  Promise.all([loadTopicInfo(gen, name, parts), loadMessages(gen, name, query, false)])
    .then(() => { if (gen === navGen) setLoaded('topic'); });
}

// The configs list is long (every config, with its source): closed unless the user opened it before.
function configsBox(parts) {
  parts.configsTitle = el('summary', {text: 'Configs'});
  const box = el('details', {class: 'card', id: 'configs-section', open: sessionStorage.getItem(CONFIGS_KEY) === 'open'},
                 parts.configsTitle, parts.configs);
  box.addEventListener('toggle', () => sessionStorage.setItem(CONFIGS_KEY, box.open ? 'open' : 'closed'));
  return box;
}

let topicParts = null;
async function loadTopicInfo(gen, name, parts) {
  try {
    const t = await api('v1/topics/' + encodeURIComponent(name));
    if (gen !== navGen) return;
    if (t.view_of) {
      parts.info.replaceChildren('View of ', topicLink(t.view_of),
        (t.view_tags || []).length ? ` with tags ${(t.view_tags || []).join(', ')}` : '');
    }
    parts.partitions.replaceChildren(table('partitions-table',
      [['Partition', 'num'], ['Leader', 'num'], ['Replicas'], ['ISR'], ['Log start', 'num'], ['Log end', 'num'],
       ['Size', 'num']], t.partitions || [],
      p => ({attrs: {dataset: {partition: String(p.partition)}},
        cells: [p.partition, p.leader, idList(p.replicas), idList(p.isr), p.log_start_offset, p.log_end_offset,
                numCell(p.bytes, fmtBytes(p.bytes))]})));
    const configs = t.configs || [], overridden = configs.filter(c => c.source !== 'DEFAULT_CONFIG').length;
    parts.configsTitle.textContent = `Configs (${fmtNum(configs.length)}, ${fmtNum(overridden)} not default)`;
    parts.configs.replaceChildren(table('configs-table', [['Name'], ['Value'], ['Source']], configs,
      c => [c.name, el('span', {class: 'mono', text: c.value ?? '—'}), c.source]));
  } catch (e) {
    if (gen !== navGen) return;
    showError(`Could not load topic ${name}: ${e.message}`);
  }
}

function browseForm(name) {
  const f = el('form', {id: 'browse-form', class: 'inline-form'},
    el('label', {}, 'Find ', el('select', {name: 'mode'}, MODES.map(([v, l]) => el('option', {value: v, text: l})))),
    el('label', {class: 'grow'}, 'Value ', el('input', {name: 'value', type: 'text'})),
    el('label', {}, 'Tag ', el('input', {name: 'tag', type: 'text', size: 8})),
    el('label', {}, 'Partition ', el('input', {name: 'partition', type: 'number', min: 0, class: 'short'})),
    el('label', {}, 'Limit ', el('input', {name: 'limit', type: 'number', min: 1, max: 500, class: 'short',
                                             value: String(DEFAULT_LIMIT)})),
    el('button', {type: 'submit', text: 'Show messages'}));
  const e = f.elements;
  e.mode.addEventListener('change', () => { e.value.placeholder = PLACEHOLDERS[e.mode.value]; });
  f.addEventListener('submit', ev => {
    ev.preventDefault();
    const mode = e.mode.value, value = e.value.value.trim(), q = new URLSearchParams();
    try {
      if (mode !== 'newest' && !value) throw new Error(`Enter a value to search ${MODES.find(m => m[0] === mode)[1]}.`);
      if (mode === 'from') q.set('from', normalizeTime(value));
      if (mode === 'key' || mode === 'msg_id') q.set(mode, value);
      if (mode === 'offset') {
        if (!/^\d+$/.test(value)) throw new Error('The offset must be a whole number.');
        if (e.partition.value === '') throw new Error('Searching from an offset needs a partition.');
        q.set('offset', value);
      }
    } catch (err) { showError(err.message); return; }
    if (e.partition.value !== '') q.set('partition', e.partition.value);
    if (e.tag.value.trim()) q.set('tag', e.tag.value.trim());
    if (e.limit.value && Number(e.limit.value) !== DEFAULT_LIMIT) q.set('limit', e.limit.value);
    const qs = q.toString().replace(/%3A/gi, ':');   // keep times readable in the deep link
    const hash = '#/topics/' + encodeURIComponent(name) + (qs ? '?' + qs : '');
    clearError();
    if (location.hash === hash) route(); else location.hash = hash;
  });
  return f;
}

function fillBrowseForm(form, query) {
  const e = form.elements, mode = modeOf(query);
  e.mode.value = mode;
  e.value.value = mode === 'newest' ? '' : query.get(mode);
  e.value.placeholder = PLACEHOLDERS[mode];
  e.tag.value = query.get('tag') || '';
  e.partition.value = query.get('partition') || '';
  e.limit.value = query.get('limit') || String(DEFAULT_LIMIT);
}

async function loadMessages(gen, name, query, markLoaded = true) {
  const parts = topicParts;
  fillBrowseForm(parts.form, query);
  if (markLoaded) setLoaded('');
  const q = new URLSearchParams();
  for (const k of BROWSE_KEYS) if (query.has(k)) q.set(k, query.get(k));
  const qs = q.toString();
  parts.messages.replaceChildren(el('p', {class: 'muted', text: 'Loading messages…'}));
  parts.notices.replaceChildren();
  try {
    const res = await api('v1/topics/' + encodeURIComponent(name) + '/messages' + (qs ? '?' + qs : ''));
    if (gen !== navGen) return;
    const notices = [];
    if (res.capped) notices.push(`Showing at most 500 messages per request (you asked for more).`);
    if (typeof res.key_index_behind_bytes === 'number' && res.key_index_behind_bytes > 0) {
      notices.push(`The key index is ${fmtBytes(res.key_index_behind_bytes)} ` +
        `(${fmtNum(res.key_index_behind_bytes)} bytes) behind the log: the newest messages for this key may be missing.`);
    }
    parts.notices.replaceChildren(...notices.map(n => el('p', {class: 'notice', text: n})));
    const msgs = res.messages || [];
    parts.messages.replaceChildren(
      el('p', {class: 'muted', text: `${fmtNum(msgs.length)} message${msgs.length === 1 ? '' : 's'}` +
                                     ` (limit ${fmtNum(res.limit ?? DEFAULT_LIMIT)}).`}),
      table('messages-table', [['Partition', 'num'], ['Offset', 'num'], ['Timestamp (UTC)'], ['Msg id'], ['Key'],
                               ['Value'], ['Headers']], msgs,
        m => ({attrs: {dataset: {offset: String(m.offset), partition: String(m.partition)}},
          cells: [m.partition, m.offset, el('span', {class: 'nowrap', text: fmtTime(m.timestamp)}),
                  el('span', {class: 'mono small', text: m.msg_id ?? '—'}), el('td', {class: 'key-cell'}, payload(m.key)), el('td', {class: 'value-cell'}, payload(m.value)),
                  headersCell(m.headers)]}), 'No messages found.'));
  } catch (e) {
    if (gen !== navGen) return;
    parts.messages.replaceChildren(el('p', {class: 'error-text', text: e.message}));
    showError(`Could not load messages: ${e.message}`);
  }
  if (markLoaded && gen === navGen) setLoaded('topic');
}

// A key, value or header value: {text, size} | {hex, size, truncated} | null.
function payload(p) {
  if (p === null || p === undefined) return el('span', {class: 'muted', text: 'null'});
  const isHex = p.hex !== undefined;
  const meta = [isHex ? el('span', {class: 'badge', text: `hex, ${fmtNum(p.size)} byte${p.size === 1 ? '' : 's'}`}) : null,
                p.truncated ? el('span', {class: 'muted small cut', text: `(first 2,048 of ${fmtNum(p.size)} bytes)`}) : null];
  return el('div', {class: isHex ? 'payload is-hex' : 'payload'},
            meta.some(Boolean) ? el('div', {class: 'payload-meta'}, meta) : null,
            isHex ? el('code', {class: 'hex', text: p.hex}) : el('span', {class: 'text-value', text: p.text ?? ''}));
}

function headersCell(headers) {
  if (!headers || !headers.length) return el('span', {class: 'muted', text: '—'});
  return el('ul', {class: 'headers'}, headers.map(h => el('li', {}, el('span', {class: 'hkey', text: h.key}),
                                                            '=', payload(h.value))));
}

// ---------- consumer group page ----------

function renderGroup(gen, name) {
  const parts = {summary: el('div'), members: el('div'), lag: el('div'), chart: el('div'),
                 result: el('div', {id: 'reset-result'})};
  const form = resetForm(gen, name, parts);
  app.replaceChildren(
    el('h1', {}, 'Consumer group ', el('span', {class: 'name', text: name})),
    parts.summary,
    section('lag-section', 'Lag per partition', parts.chart, parts.lag),
    section('members-section', 'Members', parts.members),
    section('reset-section', 'Reset offsets', form, parts.result));
  loadGroup(gen, name, parts);
}

async function loadGroup(gen, name, parts) {
  setLoaded('');
  try {
    const g = await api('v1/groups/' + encodeURIComponent(name));
    if (gen !== navGen) return;
    parts.summary.replaceChildren(el('dl', {class: 'stats'},
      el('div', {}, el('dt', {text: 'State'}), el('dd', {id: 'group-state', text: g.state ?? '—'})),
      el('div', {}, el('dt', {text: 'Protocol'}),
         el('dd', {text: [g.protocol_type, g.protocol].filter(Boolean).join(' / ') || '—'})),
      el('div', {}, el('dt', {text: 'Members'}), el('dd', {text: fmtNum((g.members || []).length)})),
      el('div', {}, el('dt', {text: 'Total lag'}),
         el('dd', {id: 'group-total-lag', text: fmtNum(g.lag), dataset: {value: String(g.lag ?? '')}}))));
    parts.members.replaceChildren(table('members-table', [['Member id'], ['Client id'], ['Host'], ['Instance id'],
                                                          ['Assignment']], g.members || [],
      m => [el('span', {class: 'mono small', text: m.member_id}), m.client_id, m.client_host, m.instance_id ?? '—',
            el('ul', {class: 'plain'}, (m.assignment || []).map(a =>
              el('li', {}, topicLink(a.topic), `: ${ids(a.partitions)}`)))], 'No members: the group is empty.'));
    parts.lag.replaceChildren(table('lag-table', [['Topic'], ['Partition', 'num'], ['Committed', 'num'],
                                                  ['Log end', 'num'], ['Lag', 'num'], ['Member']], g.offsets || [],
      o => ({attrs: {dataset: {topic: o.topic, partition: String(o.partition)}},
        cells: [topicLink(o.topic), o.partition, o.committed, o.log_end_offset, numCell(o.lag, undefined, 'lag'),
                o.member_id ? el('span', {class: 'mono small', text: o.member_id}) : el('span', {class: 'muted', text: '—'})]}),
      'No committed offsets.'));
    const hist = g.lag_history || {};
    parts.chart.replaceChildren(el('div', {class: 'charts'},
      lineChart('chart-group-lag', 'Total lag (messages)', hist.samples || [], 'lag', fmtNum, hist.interval_s)));
  } catch (e) {
    if (gen !== navGen) return;
    showError(`Could not load group ${name}: ${e.message}`);
  }
  if (gen === navGen) setLoaded('group');
}

function resetForm(gen, name, parts) {
  const form = el('form', {id: 'reset-form', class: 'inline-form'},
    el('label', {}, 'To ', el('select', {name: 'to'},
      el('option', {value: 'earliest', text: 'earliest'}), el('option', {value: 'latest', text: 'latest'}),
      el('option', {value: 'datetime', text: 'a date-time'}))),
    el('label', {}, 'Date-time (UTC) ', el('input', {name: 'datetime', type: 'text',
                                                     placeholder: '2026-12-04T08:00:00Z'})),
    el('label', {}, 'Topic ', el('input', {name: 'topic', type: 'text', placeholder: 'all topics'})),
    el('label', {class: 'check'}, el('input', {name: 'dry_run', type: 'checkbox'}), ' dry run'),
    el('button', {type: 'submit', text: 'Reset offsets'}));
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    const e = form.elements, body = {to: e.to.value, dry_run: e.dry_run.checked};
    try {
      if (body.to === 'datetime') {
        if (!e.datetime.value.trim()) throw new Error('Enter the date-time to reset to.');
        body.datetime = normalizeTime(e.datetime.value);
      }
    } catch (err) { formResult(parts.result, err.message, true); showError(err.message); return; }
    if (e.topic.value.trim()) body.topic = e.topic.value.trim();
    setLoaded('');
    parts.result.replaceChildren(el('p', {class: 'muted', text: 'Resetting…'}));
    try {
      const res = await api('v1/groups/' + encodeURIComponent(name) + '/reset-offsets', 'POST', body);
      if (gen !== navGen) return;
      clearError();
      const rows = res.offsets || [];
      parts.result.replaceChildren(
        el('p', {class: res.dry_run ? 'notice' : 'ok-text', text: res.dry_run
          ? `Dry run: nothing was changed. These ${fmtNum(rows.length)} offsets would be reset:`
          : `Reset ${fmtNum(rows.length)} offsets.`}),
        table('reset-table', [['Topic'], ['Partition', 'num'], ['Old', 'num'], ['New', 'num']], rows,
          o => ({attrs: {dataset: {topic: o.topic, partition: String(o.partition)}},
                 cells: [o.topic, o.partition, o.old, o.new]}), 'No offsets to reset.'));
      if (!res.dry_run) await loadGroup(gen, name, parts);
    } catch (err) {
      if (gen !== navGen) return;
      formResult(parts.result, err.message, true);
      showError(`Offsets not reset: ${err.message}`);
    }
    if (gen === navGen) setLoaded('group');
  });
  return form;
}

// ---------- router ----------

function safeDecode(s) { try { return decodeURIComponent(s); } catch (e) { return s; } }

function parseHash() {
  const h = location.hash.replace(/^#/, '');
  const qi = h.indexOf('?');
  const query = new URLSearchParams(qi >= 0 ? h.slice(qi + 1) : '');
  const parts = (qi >= 0 ? h.slice(0, qi) : h).split('/').filter(Boolean).map(safeDecode);
  if (!parts.length) return {route: 'overview', query};
  if (parts.length === 2 && parts[0] === 'topics') return {route: 'topic', name: parts[1], query};
  if (parts.length === 2 && parts[0] === 'groups') return {route: 'group', name: parts[1], query};
  return {route: 'notfound', query};
}

function route() {
  const r = parseHash();
  if (r.route === 'topic' && current.route === 'topic' && current.name === r.name && topicParts) {
    clearError();
    loadMessages(navGen, r.name, r.query);   // a new search on the same topic: keep the page
    return;
  }
  const gen = ++navGen;
  clearTimeout(refreshTimer);
  clearError();
  if (flashFresh) flashFresh = false; else flash('');
  current = {route: r.route, name: r.name};
  topicParts = null;
  overviewParts = null;
  document.title = r.name ? `${r.name} · Gregor console` : 'Gregor console';
  if (r.route === 'overview') renderOverview(gen);
  else if (r.route === 'topic') renderTopic(gen, r.name, r.query);
  else if (r.route === 'group') renderGroup(gen, r.name);
  else {
    app.replaceChildren(el('h1', {text: 'Not found'}), el('p', {}, 'No such page. ', el('a', {href: '#/', text: 'Overview'})));
    setLoaded('notfound');
  }
  window.scrollTo(0, 0);
}

document.getElementById('nav').addEventListener('click', ev => {
  const a = ev.target.closest('a[data-section]');
  if (!a) return;
  ev.preventDefault();
  const target = document.getElementById(a.dataset.section);
  if (current.route === 'overview' && target) { target.scrollIntoView(); return; }
  pendingScroll = a.dataset.section;
  location.hash = '#/';
});

window.addEventListener('hashchange', route);
route();
