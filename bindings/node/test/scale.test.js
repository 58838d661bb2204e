'use strict'
// Many sandboxes at once through the worker pool: the async methods run on
// libuv's threads, so many calls on many sandboxes are in flight together.
// Each answer must be its own sandbox's, the descriptors held must stay at
// two per sandbox plus a constant, and closing (or creating and closing
// many) must leave the descriptor count where it started.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { Sandbox } = require('..')

const ALIVE = 200
const CYCLES = 2000

const fds = () => fs.readdirSync('/proc/self/fd').length

function roots(base, i) {
  const r = path.join(base, `r${i}`)
  const w = path.join(base, `w${i}`)
  fs.mkdirSync(path.join(r, 'sub'), { recursive: true })
  fs.mkdirSync(w)
  fs.writeFileSync(path.join(r, 'sub', 'id.txt'), `sandbox ${i}\n`)
  return [r, w]
}

test('many sandboxes used at once from the worker pool hold and release their descriptors', async () => {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-scale-')))
  try {
    const dirs = Array.from({ length: ALIVE }, (_, i) => roots(base, i))
    const before = fds()
    const boxes = dirs.map(([r, w]) => new Sandbox({ readRoots: [r], writeRoot: w, denyWrite: ['*.pem'] }))
    const held = fds() - before
    assert.ok(held <= 2 * ALIVE + 8, `${ALIVE} sandboxes hold ${held} descriptors`)

    // Every sandbox read, written and cleaned at once, three rounds: the
    // calls overlap on the pool's threads.
    for (let round = 0; round < 3; round++) {
      await Promise.all(
        boxes.map(async (sb, i) => {
          const [text, written] = await Promise.all([
            sb.readTextAsync('sub/id.txt'),
            sb.writeAsync(`t${round}.txt`, `round ${round} of ${i}`),
          ])
          assert.equal(text, `sandbox ${i}\n`)
          assert.equal(written, `round ${round} of ${i}`.length)
          assert.equal(fs.readFileSync(path.join(dirs[i][1], `t${round}.txt`), 'utf8'), `round ${round} of ${i}`)
          const hits = await sb.grepAsync('sandbox', 'sub')
          assert.deepEqual(hits, [{ path: 'sub/id.txt', line: 1, text: `sandbox ${i}` }])
          await sb.deleteAsync(`t${round}.txt`)
        }),
      )
    }
    assert.equal(fds() - before, held, 'calls left descriptors behind')
    for (const [, w] of dirs) assert.deepEqual(fs.readdirSync(w), [])

    for (const sb of boxes) sb.close()
    assert.equal(fds(), before, 'closed sandboxes still hold descriptors')
    await assert.rejects(boxes[0].readAsync('sub/id.txt'), (e) => e.code === 'E_CLOSED')

    // Created and closed many times over, with async calls in flight.
    const [r, w] = dirs[0]
    for (let k = 0; k < CYCLES; k += 50) {
      const batch = Array.from({ length: 50 }, () => new Sandbox({ readRoots: [r], writeRoot: w }))
      const texts = await Promise.all(batch.map((sb) => sb.readTextAsync('sub/id.txt')))
      assert.ok(texts.every((t) => t === 'sandbox 0\n'))
      for (const sb of batch) sb.close()
    }
    assert.equal(fds(), before, `${CYCLES} sandboxes created and closed left descriptors`)
  } finally {
    fs.rmSync(base, { recursive: true, force: true })
  }
})
