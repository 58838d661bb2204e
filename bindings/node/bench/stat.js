'use strict'
// Confined `Root#stat` of a small file against `fs.statSync` of its
// absolute path, interleaved in the same run:
//
//   node bindings/node/bench/stat.js [N] [ROUNDS]
//
// Needs the built addon (`npx napi build --platform --release` in
// bindings/node, or NAPI_RS_NATIVE_LIBRARY_PATH pointing at one: the
// loader, index.js, honours it). Each round times N calls of each (the
// order alternating between rounds, so another process's burst hits both);
// it prints the median time per call of each over ROUNDS rounds (defaults
// 100000 x 7), the median of the per-round ratios, and one tab-separated
// RATIO line for `cargo xtask bench`.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Root } = require('..')

const n = Number(process.argv[2] || 100000)
const rounds = Number(process.argv[3] || 7)

function median(v) {
  const s = [...v].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

function time(f) {
  const t = process.hrtime.bigint()
  for (let i = 0; i < n; i++) f()
  return Number(process.hrtime.bigint() - t) / n
}

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-bench-')))
try {
  fs.mkdirSync(path.join(dir, 'd'))
  const abs = path.join(dir, 'd', 'small.txt')
  fs.writeFileSync(abs, 'hello\n')
  const rel = 'd/small.txt'
  const root = Root.open(dir)
  if (root.stat(rel).size !== 6 || fs.statSync(abs).size !== 6) throw new Error('wrong size')

  const own = () => root.stat(rel)
  const ref = () => fs.statSync(abs)
  // Warm up both (JIT, page cache).
  for (let i = 0; i < Math.min(n, 10000); i++) {
    own()
    ref()
  }
  const t = { own: [], ref: [], ratio: [] }
  for (let r = 0; r < rounds; r++) {
    let a, b
    if (r % 2 === 0) {
      a = time(own)
      b = time(ref)
    } else {
      b = time(ref)
      a = time(own)
    }
    t.own.push(a)
    t.ref.push(b)
    t.ratio.push(a / b)
  }
  const [mo, mr, ratio] = [median(t.own), median(t.ref), median(t.ratio)]
  console.log(`node ${process.version}; ${n} calls x ${rounds} rounds, interleaved, median per call:`)
  console.log(`  Root#stat(rel)          ${mo.toFixed(0).padStart(8)} ns`)
  console.log(`  fs.statSync(abs path)   ${mr.toFixed(0).padStart(8)} ns`)
  console.log(`ratio Root#stat / fs.statSync = ${ratio.toFixed(2)}x (median of per-round ratios)`)
  console.log(`RATIO\tnode\tstat/Root#stat\t${mo.toFixed(1)}\t${mr.toFixed(1)}\t${ratio.toFixed(4)}\tfs.statSync`)
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
