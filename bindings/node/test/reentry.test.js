'use strict'
// Re-entrant and concurrent use: an audit callback that calls, then
// closes, the sandbox it reports on; close while async calls are in
// flight; host directories holding a NUL byte.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')

const { Root, Sandbox } = require('..')

function tree() {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-reentry-')))
  fs.writeFileSync(path.join(dir, 'a.txt'), 'A')
  for (let i = 0; i < 200; i++) {
    fs.mkdirSync(path.join(dir, `d${i % 20}`), { recursive: true })
    fs.writeFileSync(path.join(dir, `d${i % 20}`, `f${i}.txt`), `line ${i} needle\n`)
  }
  return dir
}

test('bind9: an audit callback may call, then close, its own sandbox', async () => {
  const dir = tree()
  try {
    const seen = []
    const nested = []
    let sb
    sb = new Sandbox({
      readRoots: [dir],
      audit: (e) => {
        seen.push(`${e.op}:${e.outcome}`)
        if (seen.length !== 1) return
        nested.push(sb.stat('a.txt').size)
        sb.close()
        try {
          sb.stat('a.txt')
        } catch (err) {
          nested.push(err.code)
        }
      },
    })
    assert.equal(sb.readText('a.txt'), 'A')
    for (let i = 0; i < 100 && seen.length < 3; i++) await sleep(10)
    assert.deepEqual(nested, [1, 'E_CLOSED'])
    assert.deepEqual(seen, ['read:OK', 'stat:OK', 'stat:E_CLOSED'])
    assert.equal(sb.closed, true)
    sb.close() // twice is fine
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('bind9: close while async searches run answers each whole or E_CLOSED', async () => {
  const dir = tree()
  try {
    const sb = new Sandbox({ readRoots: [dir] })
    const calls = []
    for (let i = 0; i < 16; i++) {
      calls.push(sb.grepAsync('needle', null, 1000).then((r) => r.length, (e) => e.code))
      calls.push(sb.readAsync('a.txt').then((b) => b.toString(), (e) => e.code))
    }
    sb.close()
    for (const r of await Promise.all(calls)) {
      assert.ok(r === 200 || r === 'A' || r === 'E_CLOSED', `answer ${r}`)
    }
    assert.throws(() => sb.read('a.txt'), (e) => e.code === 'E_CLOSED')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('bind9: a host directory holding a NUL byte is E_PATH_INVALID naming it', () => {
  const dir = tree()
  try {
    for (const d of [`${dir}\0`, `${dir}\0/../x`, `${dir}/\0`]) {
      for (const open of [() => Root.open(d), () => new Sandbox({ readRoots: [d] }), () => new Sandbox({ writeRoot: d })]) {
        assert.throws(open, (e) => {
          assert.equal(e.code, 'E_PATH_INVALID', e.message)
          assert.match(e.message, /NUL/)
          return true
        })
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
