// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// A second pprof decoder for the e2e tests: reads a .pb.gz with the npm
// pprof-format package (not Go's) and prints what the tests check, as JSON.
import { readFileSync } from 'node:fs'
import { gunzipSync } from 'node:zlib'
import { Profile } from 'pprof-format'

const raw = readFileSync(process.argv[2])
const p = Profile.decode(raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw) : raw)
const s = (i) => p.stringTable.strings[Number(i)]
const num = (v) => Number(v)

const out = {
  sampleTypes: p.sampleType.map((t) => [s(t.type), s(t.unit)]),
  defaultSampleType: s(p.defaultSampleType),
  totals: p.sampleType.map((_, i) => p.sample.reduce((a, x) => a + num(x.value[i]), 0)),
  mappings: p.mapping.map((m) => ({
    id: num(m.id), start: num(m.memoryStart), limit: num(m.memoryLimit),
    offset: num(m.fileOffset), file: s(m.filename), buildId: s(m.buildId),
    hasFunctions: !!m.hasFunctions, hasFilenames: !!m.hasFilenames,
    hasLineNumbers: !!m.hasLineNumbers
  })),
  functions: p.function.map((f) => ({
    id: num(f.id), name: s(f.name), systemName: s(f.systemName),
    file: s(f.filename), startLine: num(f.startLine)
  })),
  locations: p.location.map((l) => ({
    id: num(l.id), mapping: num(l.mappingId), address: num(l.address),
    lines: l.line.map((x) => ({ function: num(x.functionId), line: num(x.line) }))
  })),
  samples: p.sample.map((x) => ({
    locations: x.locationId.map(num),
    values: x.value.map(num),
    labels: x.label.map((l) => [s(l.key), l.str ? s(l.str) : num(l.num)])
  }))
}
process.stdout.write(JSON.stringify(out))
