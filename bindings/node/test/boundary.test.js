'use strict'
// Arguments at the JavaScript boundary: numbers and strings that Node-API
// would convert silently (a number to u32 modulo 2**32, a lone surrogate to
// U+FFFD) are refused with E_REQUEST naming the argument, never guessed.

const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { Root, Sandbox } = require('..')

function throwsRequest(fn, what) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, 'an Error')
    assert.equal(e.code, 'E_REQUEST', e.message)
    if (what) assert.match(e.message, new RegExp(what), e.message)
    return true
  })
}

async function rejectsRequest(promise, what) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.code, 'E_REQUEST', e.message)
    if (what) assert.match(e.message, new RegExp(what), e.message)
    return true
  })
}

let dir
let ws
before(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-boundary-')))
  ws = path.join(dir, 'ws')
  fs.mkdirSync(ws)
  fs.writeFileSync(path.join(ws, 'a.txt'), 'l1\nl2\nl3\nl4\nl5\n')
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

// Not counts. What ToUint32 would make of each: -1 is 2**32 - 1, NaN and
// Infinity are 0, a fraction loses its part, 2**53 + 2 and 1e300 their
// high bits.
const NOT_COUNTS = [-1, NaN, Infinity, 1.5, 2 ** 53 + 2, 1e300]
// A count that ToUint32 would take as 3.
const WRAPS_TO_3 = 2 ** 32 + 3

describe('numbers are not wrapped to 32 bits', () => {
  test('Root modes: out of range, fractional, NaN or beyond 07777 are E_REQUEST', () => {
    const root = Root.open(ws)
    try {
      for (const mode of [2 ** 32 + 0o755, -1, NaN, 0o755 + 0.5, 0o100755, 0o17777]) {
        throwsRequest(() => root.mkdir('d', mode), 'mode')
        throwsRequest(() => root.openFile('f', 'w', mode), 'mode')
      }
      assert.deepEqual(fs.readdirSync(ws).sort(), ['a.txt'])
      root.mkdir('d', 0o750)
      assert.equal(fs.statSync(path.join(ws, 'd')).mode & 0o777, 0o750 & ~process.umask())
      fs.closeSync(root.openFile('f', 'w', 0o640))
      assert.equal(fs.statSync(path.join(ws, 'f')).mode & 0o777, 0o640 & ~process.umask())
      fs.rmSync(path.join(ws, 'd'), { recursive: true })
      fs.rmSync(path.join(ws, 'f'))
    } finally {
      root.close()
    }
  })

  test('readLines offset and limit', async () => {
    const sb = new Sandbox({ readRoots: [ws] })
    for (const n of NOT_COUNTS) {
      throwsRequest(() => sb.readLines('a.txt', n, 1), 'offset')
      throwsRequest(() => sb.readLines('a.txt', 1, n), 'limit')
      await rejectsRequest(sb.readLinesAsync('a.txt', n, 1), 'offset')
      await rejectsRequest(sb.readLinesAsync('a.txt', 1, n), 'limit')
    }
    // Past the end: no lines (not line 3); over the most (not 3 lines).
    assert.equal(sb.readLines('a.txt', WRAPS_TO_3, 1).lines, 0)
    throwsRequest(() => sb.readLines('a.txt', 1, WRAPS_TO_3), 'limit')
    await rejectsRequest(sb.readLinesAsync('a.txt', 1, WRAPS_TO_3), 'limit')
    assert.equal(sb.readLines('a.txt', 3, 1).content.toString(), 'l3\n')
    assert.equal((await sb.readLinesAsync('a.txt', 3, 1)).content.toString(), 'l3\n')
  })

  test('grep maxResults, before and after', async () => {
    const sb = new Sandbox({ readRoots: [ws] })
    for (const n of [...NOT_COUNTS, WRAPS_TO_3]) {
      throwsRequest(() => sb.grep('l', undefined, n), 'max_?[rR]esults')
      await rejectsRequest(sb.grepAsync('l', undefined, n), 'max_?[rR]esults')
      throwsRequest(() => sb.grep('l3', undefined, undefined, { before: n }), 'before')
      throwsRequest(() => sb.grep('l3', undefined, undefined, { after: n }), 'after')
      await rejectsRequest(sb.grepAsync('l3', undefined, undefined, { after: n }), 'after')
    }
    assert.equal(sb.grep('l', undefined, 2).length, 2)
    assert.deepEqual(sb.grep('l3', undefined, undefined, { before: 1 })[0].before, ['l2'])
  })
})
