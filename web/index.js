// index.js - the start page: the processes heapprofd profiles, from
// /debug/pprof/?format=json, refreshed every few seconds. The allocation
// rate is the change in allocated bytes between two refreshes (the mean
// since attach until the second one arrives). Each row has a sparkline
// of its in-use bytes over the last ten minutes (chart.js; 60 points).
'use strict';
(function () {
  const REFRESH_MS = 5000;
  const fmt = window.hpFormat;
  const previous = new Map(); // pid -> the target as of the last refresh

  // Bytes per second allocated by target `t`, and over what it was measured.
  function allocationRate(t) {
    const before = previous.get(t.pid);
    const dt = before ? t.profiled_seconds - before.profiled_seconds : 0;
    if (before && dt > 0 && t.allocated_bytes >= before.allocated_bytes)
      return { rate: (t.allocated_bytes - before.allocated_bytes) / dt, over: 'over the last ' + fmt.duration(dt) };
    const rate = t.profiled_seconds > 0 ? t.allocated_bytes / t.profiled_seconds : 0;
    return { rate, over: 'mean since attach' };
  }

  // CPU time: milliseconds below a second (the cost of a short look).
  function cpuTime(seconds) {
    return seconds < 1 ? (seconds * 1000).toFixed(1) + ' ms' : fmt.duration(seconds);
  }

  // The columns, in order: add one here and its field in daemon/http/targets_json.c.
  const COLUMNS = [
    { title: 'pid', cell: (t, td) => {
      const a = document.createElement('a');
      a.href = '/process?pid=' + t.pid;
      a.textContent = t.pid;
      td.appendChild(a);
    } },
    { title: 'command', name: true, cell: (t, td) => { td.textContent = t.comm; } },
    { title: 'in use', cell: (t, td) => { td.textContent = fmt.bytes(t.inuse_bytes); } },
    { title: 'in use over time', cell: (t, td) => {
      td.className = 'spark-cell';
      td.appendChild(window.hpChart.sparkline(t.history_inuse_bytes || [], t.history_period_seconds));
    } },
    { title: 'allocation rate', cell: (t, td) => {
      const r = allocationRate(t);
      td.textContent = fmt.bytes(r.rate) + '/s';
      td.title = r.over;
    } },
    { title: 'allocated', cell: (t, td) => { td.textContent = fmt.bytes(t.allocated_bytes); } },
    { title: 'profiled for', cell: (t, td) => { td.textContent = fmt.duration(t.profiled_seconds); } },
    { title: 'held by', cell: (t, td) => {
      td.textContent = t.held_by.join(', ');
      td.title = t.detach_in_seconds === null ? 'profiled while it runs'
        : 'detached in ' + fmt.duration(t.detach_in_seconds) + ' unless asked for again';
    } },
    { title: 'cost', cell: (t, td) => {
      td.textContent = t.cost_percent === null ? cpuTime(t.cost_cpu_seconds) + ' CPU'
        : t.cost_percent.toFixed(t.cost_percent < 10 ? 1 : 0) + '% CPU';
      td.title = t.probe_hits + ' probe hits, ~' + cpuTime(t.cost_cpu_seconds) +
        ' of CPU added since attach' +
        (t.forks_unprofiled ? '; ' + t.forks_unprofiled + ' children not profiled (--max-targets)' : '');
    } },
    { title: 'sampler', cell: (t, td) => {
      const families = t.interposed || [];
      td.textContent = t.sampler + (families.length ? ': ' + families.join(', ') : '');
      td.title = (t.sampler_note ? 'not inprocess: ' + t.sampler_note + '. ' : '') +
        'Allocator entries its calls reach the sampler by: ' + (families.join(', ') || 'none');
    } },
    { title: 'allocator', name: true, cell: (t, td) => { td.textContent = t.allocator; } },
  ];

  function header() {
    const tr = document.createElement('tr');
    for (const c of COLUMNS) {
      const th = document.createElement('th');
      th.textContent = c.title;
      if (c.name) th.className = 'name';
      tr.appendChild(th);
    }
    document.querySelector('#targets thead').replaceChildren(tr);
  }

  function render(targets) {
    const rows = targets.map((t) => {
      const tr = document.createElement('tr');
      tr.dataset.pid = t.pid;
      for (const c of COLUMNS) {
        const td = document.createElement('td');
        if (c.name) td.className = 'name';
        c.cell(t, td);
        tr.appendChild(td);
      }
      tr.addEventListener('click', (e) => {
        if (e.target.tagName !== 'A') location.href = '/process?pid=' + t.pid;
      });
      return tr;
    });
    document.querySelector('#targets tbody').replaceChildren(...rows);
    previous.clear();
    for (const t of targets) previous.set(t.pid, t);
  }

  function status(text, isError) {
    const s = document.getElementById('status');
    s.textContent = text;
    s.classList.toggle('error', !!isError);
  }

  async function refresh() {
    try {
      const r = await fetch('/debug/pprof/?format=json', { cache: 'no-store' });
      const body = await r.text();
      if (!r.ok) throw new Error(body.trim() || r.statusText);
      const targets = JSON.parse(body).targets;
      targets.sort((a, b) => b.inuse_bytes - a.inuse_bytes);
      render(targets);
      status(targets.length ? targets.length + ' process' + (targets.length > 1 ? 'es' : '') +
             ', largest in use first; click one for its flame graph.'
                            : 'No process is profiled yet: open one by its pid below, or start heapprofd with --pid, --comm, --exe or --cgroup.');
      document.body.dataset.state = 'ready';
    } catch (e) {
      status('Could not read the list of processes: ' + e.message, true);
      document.body.dataset.state = 'error';
    }
  }

  header();
  refresh();
  setInterval(refresh, REFRESH_MS);
})();
