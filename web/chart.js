// chart.js - memory over time: the process page's chart of in-use bytes
// and allocation rate (d3: scales and axes), and the index's sparklines
// (plain SVG: the index loads no d3). Both read the history the daemon
// keeps per process (/debug/pprof/history, docs/http-api.md).
'use strict';
window.hpChart = (function () {
  const fmt = window.hpFormat;
  const SVG = 'http://www.w3.org/2000/svg';

  function el(name, attrs) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  // A sparkline of `values` (in-use bytes, oldest first, `period` seconds
  // apart): a line scaled from 0 to its largest value, what it shows as
  // the tooltip.
  function sparkline(values, period, width, height) {
    width = width || 120;
    height = height || 22;
    const svg = el('svg', { width, height, class: 'spark', viewBox: `0 0 ${width} ${height}` });
    if (!values || values.length < 2) {
      svg.appendChild(el('title')).textContent = 'not enough history yet';
      return svg;
    }
    const max = Math.max(...values) || 1;
    const x = (i) => (i * (width - 2)) / (values.length - 1) + 1;
    const y = (v) => height - 1 - (v / max) * (height - 3);
    const pts = values.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1));
    svg.appendChild(el('polygon', { points: `1,${height - 1} ${pts.join(' ')} ${x(values.length - 1).toFixed(1)},${height - 1}`, class: 'spark-area' }));
    svg.appendChild(el('polyline', { points: pts.join(' '), class: 'spark-line' }));
    svg.appendChild(el('title')).textContent = 'in use over the last ' +
      fmt.duration((values.length - 1) * period) + ': from ' + fmt.bytes(values[0]) + ' to ' +
      fmt.bytes(values[values.length - 1]) + ' (max ' + fmt.bytes(max) + ')';
    return svg;
  }

  // Ticks of a byte axis from 0 to about `max`: steps of 1, 2 or 5 times
  // a power of ten in the unit the step is shown in (B, KiB, MiB, ...), so
  // that labels read 0 B, 100 KiB, 200 KiB rather than 97.7 KiB, 195 KiB.
  // Returns the ticks; the last is the axis's top.
  function byteTicks(max) {
    const raw = Math.max(max, 4) / 4;
    const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(raw) / Math.log(1024))));
    const mag = Math.pow(10, Math.floor(Math.log10(raw / unit)));
    const step = unit * mag * ([1, 2, 5, 10].find((m) => m * mag * unit >= raw) || 10);
    const ticks = [];
    for (let v = 0; ticks.length < 2 || ticks[ticks.length - 1] < max; v += step) ticks.push(v);
    return ticks;
  }

  // Time ticks: hours and minutes, with seconds when the chart spans
  // less than ten minutes.
  function timeTickFormat(spanMs) {
    return window.d3.timeFormat(spanMs < 600000 ? '%H:%M:%S' : '%H:%M');
  }

  // Draws the history `h` (the JSON of /debug/pprof/history) into `div`:
  // in-use bytes as an area (left axis, bytes), the allocation rate as a
  // line (right axis, bytes per second), time along the bottom.
  function timeChart(div, h) {
    const d3 = window.d3;
    const rows = h.points.map((p) => ({ t: new Date(p[0]), inuse: p[1], alloc: p[3] }));
    for (let i = 0; i < rows.length; i++) {
      const prev = rows[i - 1];
      const dt = prev ? (rows[i].t - prev.t) / 1000 : 0;
      rows[i].rate = prev && dt > 0 ? Math.max(0, rows[i].alloc - prev.alloc) / dt : null;
    }
    if (rows.length < 2) {
      const p = document.createElement('p');
      p.className = 'status';
      p.textContent = 'Memory over time appears here after two points (one every ' +
        h.period_seconds + ' s).';
      div.replaceChildren(p);
      return;
    }
    const width = Math.max(div.clientWidth, 480);
    const height = 240;
    const m = { top: 22, right: 92, bottom: 42, left: 84 };
    const svg = d3.create('svg').attr('width', width).attr('height', height).attr('class', 'history');
    div.replaceChildren(svg.node());
    const x = d3.scaleTime().domain(d3.extent(rows, (r) => r.t)).range([m.left, width - m.right]);
    const yTicks = byteTicks(d3.max(rows, (r) => r.inuse));
    const y = d3.scaleLinear().domain([0, yTicks[yTicks.length - 1]]).range([height - m.bottom, m.top]);
    const rTicks = byteTicks(d3.max(rows, (r) => r.rate || 0));
    const yr = d3.scaleLinear().domain([0, rTicks[rTicks.length - 1]]).range([height - m.bottom, m.top]);
    const span = rows[rows.length - 1].t - rows[0].t;

    svg.append('g').attr('class', 'grid').attr('transform', `translate(${m.left},0)`)
      .call(d3.axisLeft(y).tickValues(yTicks).tickSize(-(width - m.left - m.right)).tickFormat(''));
    svg.append('path').datum(rows).attr('class', 'inuse-area')
      .attr('d', d3.area().x((r) => x(r.t)).y0(y(0)).y1((r) => y(r.inuse)));
    svg.append('path').datum(rows).attr('class', 'inuse-line')
      .attr('d', d3.line().x((r) => x(r.t)).y((r) => y(r.inuse)));
    svg.append('path').datum(rows.filter((r) => r.rate !== null)).attr('class', 'rate-line')
      .attr('d', d3.line().x((r) => x(r.t)).y((r) => yr(r.rate)));

    svg.append('g').attr('class', 'axis x').attr('transform', `translate(0,${height - m.bottom})`)
      .call(d3.axisBottom(x).ticks(Math.max(2, Math.floor((width - m.left - m.right) / 110)))
        .tickFormat(timeTickFormat(span)));
    svg.append('g').attr('class', 'axis y').attr('transform', `translate(${m.left},0)`)
      .call(d3.axisLeft(y).tickValues(yTicks).tickFormat(fmt.bytes));
    svg.append('g').attr('class', 'axis rate').attr('transform', `translate(${width - m.right},0)`)
      .call(d3.axisRight(yr).tickValues(rTicks).tickFormat((v) => fmt.bytes(v) + '/s'));

    // Axis titles, with their units.
    svg.append('text').attr('class', 'axis-title inuse')
      .attr('transform', `translate(16,${(height - m.bottom + m.top) / 2}) rotate(-90)`)
      .attr('text-anchor', 'middle').text('in use (bytes)');
    svg.append('text').attr('class', 'axis-title rate')
      .attr('transform', `translate(${width - 14},${(height - m.bottom + m.top) / 2}) rotate(90)`)
      .attr('text-anchor', 'middle').text('allocated (bytes/s)');
    svg.append('text').attr('class', 'axis-title')
      .attr('x', (m.left + width - m.right) / 2).attr('y', height - 6).attr('text-anchor', 'middle')
      .text('time (local, one point every ' + h.period_seconds + ' s)');
    svg.append('text').attr('class', 'chart-note').attr('x', m.left).attr('y', 14)
      .text((h.live ? '' : 'process gone; ') + 'last ' + fmt.duration(span / 1000) +
            ': in use ' + fmt.bytes(rows[0].inuse) + ' → ' + fmt.bytes(rows[rows.length - 1].inuse));
  }

  return { sparkline, timeChart };
})();
