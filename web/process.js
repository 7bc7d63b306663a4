// process.js - one process's heap: the flame graph of one sample type
// (d3-flame-graph, vendored in third_party/) drawn from the daemon's
// collapsed stacks (format=folded), and its top table (format=text). The
// view is cumulative since attach, a delta over the next S seconds
// (seconds=), or the leak view of allocations still alive after an age
// (min_age=), or the change since a base: "Mark as base" keeps the
// profile of now on the daemon (POST /debug/pprof/snapshot), and the diff
// view draws the difference (base=ID): growth in red, shrinkage in blue.
// Above it, memory over time (chart.js). The controls' state lives in the
// URL, so a view can be linked.
'use strict';
(function () {
  const fmt = window.hpFormat;
  const form = document.getElementById('controls');
  const flameDiv = document.getElementById('flame');
  const params = new URLSearchParams(location.search);
  const pid = params.get('pid') || '';
  let chart = null;
  let loadSeq = 0; // a newer load makes an older one's answer stale
  let base = params.get('base') || ''; // the snapshot id of the base, if one is marked
  let baseAt = Number(params.get('base_at')) || 0; // when it was marked (ms), for the page only
  const HISTORY_REFRESH_MS = 10000;

  function status(text, isError) {
    const s = document.getElementById('status');
    s.textContent = text;
    s.classList.toggle('error', !!isError);
  }

  // The form's state from the URL.
  function readParams() {
    form.sample_index.value = params.get('sample_index') || 'inuse_space';
    form.view.value = params.has('seconds') ? 'delta' : params.has('min_age') ? 'leak'
      : base && params.get('view') === 'diff' ? 'diff' : 'all';
    if (params.has('seconds')) form.seconds.value = params.get('seconds');
    if (params.has('min_age')) form.min_age.value = params.get('min_age');
    form.icicle.checked = params.get('icicle') === '1';
  }

  // The profile query of the form's state (without format).
  function profileQuery() {
    const q = new URLSearchParams({ pid });
    if (form.view.value === 'delta') q.set('seconds', form.seconds.value.trim());
    if (form.view.value === 'leak') q.set('min_age', form.min_age.value.trim());
    if (form.view.value === 'diff') q.set('base', base);
    return q;
  }

  function isDiff() { return form.view.value === 'diff'; }

  function urlOf(format) {
    const q = profileQuery();
    if (format) {
      q.set('format', format);
      q.set('sample_index', form.sample_index.value);
    }
    return '/debug/pprof/heap?' + q.toString();
  }

  // GETs `url`; its body, or an Error carrying the daemon's one-line reason.
  async function fetchText(url) {
    const r = await fetch(url, { cache: 'no-store' });
    const body = await r.text();
    if (!r.ok) throw new Error(body.trim() || r.status + ' ' + r.statusText);
    return body;
  }

  // The flame graph's tree from collapsed stacks: {name, value, children}.
  // A diff's stacks have signed values: each node sums its growth and its
  // shrinkage apart, its width is both (how much changed), and `delta` is
  // the net change, which d3-flame-graph's colour mapper reads.
  function treeOf(folded, rootName) {
    const node0 = (name) => ({ name, value: 0, grow: 0, shrink: 0, delta: 0, children: [], index: new Map() });
    const root = node0(rootName);
    const add = (n, v) => {
      n.value += Math.abs(v);
      if (v > 0) n.grow += v; else n.shrink -= v;
      n.delta += v;
    };
    for (const line of folded.split('\n')) {
      const sp = line.lastIndexOf(' ');
      if (sp <= 0) continue;
      const value = Number(line.slice(sp + 1));
      if (!value) continue; // a stack whose growth and shrinkage cancel
      add(root, value);
      let node = root;
      for (const frame of line.slice(0, sp).split(';')) {
        let child = node.index.get(frame);
        if (!child) {
          child = node0(frame);
          node.index.set(frame, child);
          node.children.push(child);
        }
        add(child, value);
        node = child;
      }
    }
    (function drop(n) { delete n.index; n.children.forEach(drop); })(root);
    return root;
  }

  // A diff frame's colour: red for growth, blue for shrinkage, the deeper
  // the more one-sided its change is (grey: as much grew as shrank).
  function diffColor(d, original) {
    if (d.highlight) return original;
    const n = d.data;
    const share = n.value ? Math.abs(n.delta) / n.value : 0;
    const fade = Math.round(220 * (1 - share));
    if (n.delta > 0) return `rgb(255,${fade + 35 * (1 - share) | 0},${fade + 35 * (1 - share) | 0})`;
    if (n.delta < 0) return `rgb(${fade + 35 * (1 - share) | 0},${fade + 35 * (1 - share) | 0},255)`;
    return 'rgb(220,220,220)';
  }

  // A frame's tooltip: its value and share, or in a diff its growth and shrinkage.
  function frameLabel(d, total) {
    const type = form.sample_index.value;
    const n = d.data;
    if (!isDiff())
      return n.name + ': ' + fmt.value(type, n.value) + ' (' + (100 * n.value / total).toFixed(2) + '%)';
    const sign = n.delta > 0 ? '+' : n.delta < 0 ? '−' : '±';
    return n.name + ': ' + sign + fmt.value(type, Math.abs(n.delta)) + ' net (grew ' +
      fmt.value(type, n.grow) + ', shrank ' + fmt.value(type, n.shrink) + ')';
  }

  function drawFlame(tree) {
    const total = tree.value || 1;
    chart = flamegraph.default()
      .width(Math.max(flameDiv.clientWidth, 400))
      .cellHeight(18)
      .minFrameSize(1)
      .transitionDuration(250)
      .inverted(form.icicle.checked)
      .sort(true)
      .label((d) => frameLabel(d, total));
    if (isDiff()) chart.setColorMapper(diffColor);
    flameDiv.replaceChildren();
    window.d3.select(flameDiv).datum(tree).call(chart);
    if (form.search.value.trim()) chart.search(form.search.value.trim());
  }

  function drawTop(text) {
    const rows = [];
    for (const line of text.split('\n')) {
      const m = line.match(/^\s*(\S+)\s+(\S+%)\s+(\S+%)\s+(\S+)\s+(\S+%)\s+(.*)$/);
      if (!m || m[1] === 'flat') continue;
      const tr = document.createElement('tr');
      if (isDiff() && m[1] !== '0') tr.className = m[1].startsWith('-') ? 'shrink' : 'grow';
      m.slice(1).forEach((cell, i) => {
        const td = document.createElement('td');
        td.textContent = cell;
        if (i === 5) td.className = 'name';
        tr.appendChild(td);
      });
      const name = m[6].replace(/ \((partial-)?inline\)$/, '');
      tr.addEventListener('click', () => {
        form.search.value = name;
        if (chart) chart.search(name);
      });
      rows.push(tr);
    }
    document.querySelector('#top tbody').replaceChildren(...rows);
  }

  // The process's command name, from the index; "" if it is not listed.
  async function commOf() {
    try {
      const list = JSON.parse(await fetchText('/debug/pprof/?format=json')).targets;
      const t = list.find((x) => String(x.pid) === pid);
      return t ? t.comm : '';
    } catch (e) {
      return '';
    }
  }

  async function load() {
    const seq = ++loadSeq;
    flameDiv.dataset.state = 'loading';
    for (const [id, format] of [['download', ''], ['folded-link', 'folded'], ['text-link', 'text']])
      document.getElementById(id).href = urlOf(format);
    loadHistory(); // the chart, as of now too
    const delta = form.view.value === 'delta';
    status(delta ? 'Collecting allocations for ' + form.seconds.value + ' s…' : 'Loading…');
    try {
      // Both at once: a delta's two windows then start and end together.
      const [folded, top, comm] = await Promise.all([
        fetchText(urlOf('folded')), fetchText(urlOf('text')), commOf()]);
      if (seq !== loadSeq) return;
      const name = (comm ? comm + ' ' : '') + '(pid ' + pid + ')';
      document.getElementById('title').textContent = name;
      document.title = 'heapprofd: ' + name;
      const tree = treeOf(folded, name);
      drawTop(top);
      showBase();
      const type = form.sample_index.value;
      if (!tree.children.length) {
        flameDiv.replaceChildren();
        chart = null;
        status(isDiff() ? 'No change of this sample type since the base.'
          : 'No samples of this type yet: the process was attached just now, or nothing it ' +
            'allocated is left in this view. Refresh in a while.');
      } else if (isDiff()) {
        drawFlame(tree);
        status('Since the base: ' + (tree.delta >= 0 ? '+' : '−') + fmt.value(type, Math.abs(tree.delta)) +
               ' net; grew ' + fmt.value(type, tree.grow) + ', shrank ' + fmt.value(type, tree.shrink) +
               '. Click a frame to zoom, a row of the table to find its function.');
      } else {
        drawFlame(tree);
        status(fmt.value(type, tree.value) + ' in ' + tree.children.length +
               ' root frame' + (tree.children.length > 1 ? 's' : '') +
               '. Click a frame to zoom, a row of the table to find its function.');
      }
      flameDiv.dataset.state = 'ready';
    } catch (e) {
      if (seq !== loadSeq) return;
      status(e.message, true);
      flameDiv.dataset.state = 'error';
    }
  }

  // The base's line and the diff legend, shown while a base is marked.
  function showBase() {
    const info = document.getElementById('base-info');
    info.hidden = !base;
    form.querySelector('input[name=view][value=diff]').disabled = !base;
    if (base)
      info.textContent = 'Base: snapshot ' + base +
        (baseAt ? ', marked at ' + new Date(baseAt).toLocaleTimeString() : '') +
        (isDiff() ? '.' : ' (pick "change since the base" to compare).');
    document.getElementById('legend').hidden = !isDiff();
  }

  // Keeps the profile of now as the base, then shows the change since it.
  async function markBase() {
    try {
      const r = await fetch('/debug/pprof/snapshot?pid=' + pid, { method: 'POST', cache: 'no-store' });
      const body = await r.text();
      if (!r.ok) throw new Error(body.trim() || r.status + ' ' + r.statusText);
      base = JSON.parse(body).id;
      baseAt = Date.now();
      form.view.value = 'diff';
      apply();
    } catch (e) {
      status('Could not mark the base: ' + e.message, true);
    }
  }

  // Memory over time, redrawn every HISTORY_REFRESH_MS.
  async function loadHistory() {
    const div = document.getElementById('history');
    try {
      window.hpChart.timeChart(div, JSON.parse(await fetchText('/debug/pprof/history?pid=' + pid)));
      div.dataset.state = 'ready';
    } catch (e) {
      div.textContent = 'No memory history: ' + e.message;
      div.dataset.state = 'error';
    }
  }

  // Puts the form's state in the URL and loads it.
  function apply() {
    const q = profileQuery();
    q.set('sample_index', form.sample_index.value);
    if (form.icicle.checked) q.set('icicle', '1');
    if (base) {
      q.set('base', base);
      if (baseAt) q.set('base_at', String(baseAt));
      if (isDiff()) q.set('view', 'diff');
    }
    history.replaceState(null, '', '/process?' + q.toString());
    load();
  }

  if (!/^[0-9]+$/.test(pid)) {
    status('No process: open this page as /process?pid=N', true);
    flameDiv.dataset.state = 'error';
    return;
  }
  readParams();
  form.addEventListener('submit', (e) => { e.preventDefault(); apply(); });
  form.sample_index.addEventListener('change', apply);
  document.getElementById('mark-base').addEventListener('click', markBase);
  form.icicle.addEventListener('change', apply);
  for (const r of form.querySelectorAll('input[name=view]')) r.addEventListener('change', apply);
  form.search.addEventListener('input', () => {
    if (!chart) return;
    const term = form.search.value.trim();
    if (term) chart.search(term); else chart.clear();
  });
  window.addEventListener('resize', () => {
    if (chart) chart.width(Math.max(flameDiv.clientWidth, 400)).update();
  });
  showBase();
  load();
  setInterval(loadHistory, HISTORY_REFRESH_MS);
})();
