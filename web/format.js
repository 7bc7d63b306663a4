// format.js - how heapprofd's pages print bytes, counts, rates and durations.
'use strict';
window.hpFormat = (function () {
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  // 1536 -> "1.50 KiB": binary units, three significant digits.
  function bytes(n) {
    let u = 0;
    let v = Math.abs(n);
    while (v >= 1024 && u < UNITS.length - 1) {
      v /= 1024;
      u++;
    }
    const digits = u === 0 ? 0 : v < 10 ? 2 : v < 100 ? 1 : 0;
    return (n < 0 ? '-' : '') + v.toFixed(digits) + ' ' + UNITS[u];
  }
  // 1234567 -> "1,234,567".
  function count(n) {
    return Math.round(n).toLocaleString('en-US');
  }
  // 3725 -> "1h 2m 5s".
  function duration(seconds) {
    let s = Math.floor(seconds);
    const parts = [];
    for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60]]) {
      if (s >= size) {
        parts.push(Math.floor(s / size) + unit);
        s %= size;
      }
    }
    if (s || parts.length === 0) parts.push(s + 's');
    return parts.slice(0, 2).join(' ');
  }
  // A value of the sample type `type` (alloc_space, inuse_objects, ...).
  function value(type, n) {
    return type.endsWith('_space') ? bytes(n) : count(n) + (type.endsWith('_objects') ? ' objects' : '');
  }
  return { bytes, count, duration, value };
})();
