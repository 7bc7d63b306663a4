// decode.cjs - a second reader of heapprofd's profiles, written by others:
// the npm package pprof-format (pure JavaScript, from the pprof Node.js
// bindings' authors), for tests/integration/test_formats.py.
//
//   node decode.cjs PROFILE.pb.gz
//
// Prints one JSON object: the sample types, period type and period, the
// default sample type, and per sample type the total and the totals by
// leaf function (the innermost line of the first location), as decimal
// strings (values may be 64-bit).
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const { Profile } = require('pprof-format');

const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const str = (i) => p.stringTable.strings[Number(i)];
const fnName = new Map(p.function.map((f) => [String(f.id), str(f.name)]));
const locLeaf = new Map(p.location.map((l) => [String(l.id),
  l.line.length ? fnName.get(String(l.line[0].functionId)) : '0x' + BigInt(l.address).toString(16)]));

const types = p.sampleType.map((t) => [str(t.type), str(t.unit)]);
const totals = types.map(() => 0n);
const byLeaf = {};
for (const s of p.sample) {
  const leaf = s.locationId.length ? locLeaf.get(String(s.locationId[0])) : '<empty stack>';
  const row = byLeaf[leaf] || (byLeaf[leaf] = types.map(() => 0n));
  s.value.forEach((v, i) => {
    totals[i] += BigInt(v);
    row[i] += BigInt(v);
  });
}
const strings = (a) => a.map((v) => v.toString());
process.stdout.write(JSON.stringify({
  sample_types: types,
  period_type: [str(p.periodType.type), str(p.periodType.unit)],
  period: String(p.period),
  default_sample_type: str(p.defaultSampleType),
  totals: strings(totals),
  by_leaf: Object.fromEntries(Object.entries(byLeaf).map(([k, v]) => [k, strings(v)])),
}) + '\n');
