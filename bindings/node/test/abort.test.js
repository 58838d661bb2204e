'use strict'
// The `abortSignal` of the long `…Async` calls: `Fetcher.fetchAsync`
// against a loopback server that accepts and never answers, and the
// sandbox's grep, glob and ranged read over trees and files large enough
// to be stopped midway. An already aborted signal rejects with E_ABORTED
// before anything is spent; one aborted while the call runs stops it with
// E_ABORTED; one never aborted changes nothing; the call's `abort`
// listener is gone once it ends, whichever way.

const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { getEventListeners } = require('node:events')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { setImmediate: tick, setTimeout: sleep } = require('node:timers/promises')

const { Policy, Sandbox, Fetcher } = require('..')

// A proxy in the environment makes restricted mode refuse every fetch.
for (const k of ['HTTPS_PROXY', 'HTTP_PROXY', 'ALL_PROXY', 'https_proxy', 'http_proxy', 'all_proxy']) {
  delete process.env[k]
}

function tempDir() {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-abort-')))
}

async function rejectsCode(promise, code) {
  let err
  await assert.rejects(promise, (e) => {
    err = e
    assert.ok(e instanceof Error, 'an Error')
    assert.equal(e.code, code, e.message)
    return true
  })
  return err
}

/** An AbortController whose signal counts the listeners added to it. */
function counted() {
  const ac = new AbortController()
  const s = ac.signal
  s.added = 0
  const add = s.addEventListener
  s.addEventListener = function (...args) {
    this.added++
    return add.apply(this, args)
  }
  return ac
}

/** The `abort` listeners a signal still holds. */
const listeners = (signal) => getEventListeners(signal, 'abort').length

describe('fetchAsync abortSignal', () => {
  let server
  let port
  const sockets = new Set()

  before(async () => {
    // Accepts every connection and never answers.
    server = net.createServer((socket) => {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => {})
      // Read (and drop) the request, so the client's close is seen.
      socket.resume()
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    port = server.address().port
  })

  after(async () => {
    for (const s of sockets) s.destroy()
    await new Promise((resolve) => server.close(resolve))
  })

  function fetcher(extra = '', options) {
    const dir = tempDir()
    try {
      fs.writeFileSync(path.join(dir, 'policy.toml'), `[net]\nallow = ["127.0.0.1:${port}"]\nallow_http = true\n${extra}`)
      return new Fetcher(Policy.load(path.join(dir, 'policy.toml')), options)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }

  test('aborted while waiting for an answer: E_ABORTED long before the timeout, connection closed', async () => {
    const f = fetcher('[budgets]\nnet_ops = 5\n')
    const ac = counted()
    const t0 = Date.now()
    const p = f.fetchAsync(`http://127.0.0.1:${port}/never`, { timeoutMs: 30000, abortSignal: ac.signal })
    setTimeout(() => ac.abort(), 200)
    const e = await rejectsCode(p, 'E_ABORTED')
    const took = Date.now() - t0
    assert.ok(took < 10000, `ended after ${took} ms`)
    assert.ok(Array.isArray(e.hops) && e.hops.length === 1, JSON.stringify(e.hops))
    assert.equal(ac.signal.added, 1)
    assert.equal(listeners(ac.signal), 0)
    // The fetch started, so it spent its unit.
    assert.equal(f.netOpsRemaining, 4)
    // The fetcher closed its connection: the server sees every socket go.
    for (let i = 0; i < 500 && sockets.size > 0; i++) await sleep(10)
    assert.equal(sockets.size, 0)
  })

  test('an already aborted signal rejects with E_ABORTED and spends no net_ops', async () => {
    const events = []
    const f = fetcher('[budgets]\nnet_ops = 5\n', { audit: (e) => events.push(e) })
    const ac = counted()
    ac.abort()
    await rejectsCode(f.fetchAsync(`http://127.0.0.1:${port}/never`, { timeoutMs: 30000, abortSignal: ac.signal }), 'E_ABORTED')
    await rejectsCode(f.fetchAsync(`http://127.0.0.1:${port}/never`, { abortSignal: AbortSignal.abort() }), 'E_ABORTED')
    assert.equal(f.netOpsRemaining, 5)
    assert.equal(ac.signal.added, 0)
    assert.equal(listeners(ac.signal), 0)
    assert.equal(sockets.size, 0)
    // Reported like the other refusals made before the fetcher sees a call.
    for (let i = 0; i < 100 && events.length < 2; i++) await sleep(10)
    assert.deepEqual(
      events.map((e) => [e.op, e.path, e.outcome]),
      [['fetch', `http://127.0.0.1:${port}`, 'E_ABORTED'], ['fetch', `http://127.0.0.1:${port}`, 'E_ABORTED']],
    )
  })

  test('a signal never aborted changes nothing; its listener is removed', async () => {
    const f = fetcher()
    const ac = counted()
    // The server never answers: the fetch ends at its own timeout.
    await rejectsCode(f.fetchAsync(`http://127.0.0.1:${port}/never`, { timeoutMs: 300, abortSignal: ac.signal }), 'E_TIMEOUT')
    // A refused destination rejects as before.
    await rejectsCode(f.fetchAsync('http://127.0.0.1:1/', { abortSignal: ac.signal }), 'E_NET_DENIED')
    assert.equal(ac.signal.added, 2)
    assert.equal(listeners(ac.signal), 0)
    ac.abort()
  })

  test('an abortSignal that is not one is E_REQUEST naming it; fetch (sync) takes none', async () => {
    const f = fetcher('[budgets]\nnet_ops = 1\n')
    const url = `http://127.0.0.1:${port}/`
    for (const bad of [{}, 'yes', 5, true]) {
      const e = await rejectsCode(f.fetchAsync(url, { abortSignal: bad }), 'E_REQUEST')
      assert.match(e.message, /abortSignal/)
    }
    assert.throws(() => f.fetch(url, { abortSignal: AbortSignal.abort() }), (e) => e.code === 'E_REQUEST' && /abortSignal/.test(e.message))
    assert.equal(f.netOpsRemaining, 1)
  })
})

describe('Sandbox abortSignal', () => {
  let dir
  let sb
  const FILES = 6
  const DIRS = 10000

  before(() => {
    dir = tempDir()
    // grep/: files of many short lines (grep reads them line by line).
    fs.mkdirSync(path.join(dir, 'grep'))
    const lines = Buffer.from('a short line of text\n'.repeat(400000))
    for (let i = 0; i < FILES; i++) fs.writeFileSync(path.join(dir, 'grep', `big${i}.txt`), lines)
    fs.writeFileSync(path.join(dir, 'grep', 'needle.txt'), 'hay\nneedle\n')
    // dirs/: many directories for glob to walk.
    for (let d = 0; d < DIRS / 100; d++) {
      for (let i = 0; i < 100; i++) fs.mkdirSync(path.join(dir, 'dirs', `d${d}`, `e${i}`), { recursive: true })
    }
    fs.writeFileSync(path.join(dir, 'dirs', 'd7', 'e7', 'found.md'), 'x\n')
    // lines.txt: a file whose lines a ranged read counts to the end.
    const fd = fs.openSync(path.join(dir, 'lines.txt'), 'w')
    for (let i = 0; i < 12; i++) fs.writeSync(fd, lines)
    fs.closeSync(fd)
    // The fs_ops budget is taken when an operation starts: watching it
    // tells the test that the call is under way on the pool.
    sb = new Sandbox({ readRoots: [dir], fsOps: 1000 })
  })

  after(() => {
    sb.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  /** Starts `call(signal)`, aborts it once the operation is running, and
   *  expects E_ABORTED and no listener left. */
  async function abortedMidway(call) {
    const ac = counted()
    const left = sb.fsOpsRemaining
    const p = call(ac.signal)
    // The operation has started once it took its budget unit.
    for (let i = 0; i < 100000 && sb.fsOpsRemaining === left; i++) await tick()
    assert.equal(sb.fsOpsRemaining, left - 1, 'the operation started')
    ac.abort()
    await rejectsCode(p, 'E_ABORTED')
    assert.equal(ac.signal.added, 1)
    assert.equal(listeners(ac.signal), 0)
  }

  /** An aborted signal: E_ABORTED, nothing spent, no listener added. */
  async function abortedBefore(call) {
    const ac = counted()
    ac.abort()
    const left = sb.fsOpsRemaining
    await rejectsCode(call(ac.signal), 'E_ABORTED')
    assert.equal(sb.fsOpsRemaining, left, 'no fs_ops spent')
    assert.equal(ac.signal.added, 0)
    assert.equal(listeners(ac.signal), 0)
  }

  /** A signal never aborted: the normal answer, no listener left. */
  async function unaborted(call) {
    const ac = counted()
    const r = await call(ac.signal)
    assert.equal(ac.signal.added, 1)
    assert.equal(listeners(ac.signal), 0)
    ac.abort()
    return r
  }

  test('grepAsync and grepFoundAsync', async () => {
    const grep = (s) => sb.grepAsync('needle', 'grep', 10, { abortSignal: s })
    const found = (s) => sb.grepFoundAsync('needle', 'grep', 10, { mode: 'files', abortSignal: s })
    await abortedMidway(grep)
    await abortedMidway(found)
    await abortedBefore(grep)
    await abortedBefore(found)
    assert.deepEqual((await unaborted(grep)).map((m) => [m.path, m.line, m.text]), [['grep/needle.txt', 2, 'needle']])
    const f = await unaborted(found)
    assert.deepEqual(f.files, ['grep/needle.txt'])
    assert.equal(f.truncated, false)
  })

  test('globAsync and globFoundAsync', async () => {
    const glob = (s) => sb.globAsync('**/*.md', 'dirs', { abortSignal: s })
    const found = (s) => sb.globFoundAsync('**/*.md', 'dirs', { abortSignal: s })
    await abortedMidway(glob)
    await abortedMidway(found)
    await abortedBefore(glob)
    await abortedBefore(found)
    assert.deepEqual(await unaborted(glob), ['dirs/d7/e7/found.md'])
    const f = await unaborted(found)
    assert.deepEqual(f.paths, ['dirs/d7/e7/found.md'])
    assert.equal(f.truncated, false)
  })

  test('readLinesAsync', async () => {
    const read = (s) => sb.readLinesAsync('lines.txt', 2, 1, { abortSignal: s })
    await abortedMidway(read)
    await abortedBefore(read)
    const r = await unaborted(read)
    assert.equal(r.content.toString(), 'a short line of text\n')
    assert.equal(r.totalLines, 12 * 400000)
  })

  test('the listener is removed when the call fails otherwise', async () => {
    const ac = counted()
    await rejectsCode(sb.grepAsync('(', 'grep', 10, { abortSignal: ac.signal }), 'E_REQUEST')
    await rejectsCode(sb.globAsync('*', 'missing', { abortSignal: ac.signal }), 'E_NOT_FOUND')
    await rejectsCode(sb.readLinesAsync('missing.txt', 1, 1, { abortSignal: ac.signal }), 'E_NOT_FOUND')
    assert.equal(ac.signal.added, 3)
    assert.equal(listeners(ac.signal), 0)
    // A malformed argument: refused before the signal is looked at
    // further, E_REQUEST first even with an aborted signal.
    await rejectsCode(sb.grepAsync(5, 'grep', 10, { abortSignal: AbortSignal.abort() }), 'E_REQUEST')
    await rejectsCode(sb.readLinesAsync('lines.txt', 0.5, 1, { abortSignal: ac.signal }), 'E_REQUEST')
    assert.equal(listeners(ac.signal), 0)
  })

  test('an abortSignal that is not one is E_REQUEST naming it; the sync forms take none', async () => {
    for (const bad of [{}, 'yes', 5, true]) {
      const o = { abortSignal: bad }
      for (const call of [
        () => sb.grepAsync('x', 'grep', 1, o),
        () => sb.grepFoundAsync('x', 'grep', 1, o),
        () => sb.globAsync('*', 'dirs', o),
        () => sb.globFoundAsync('*', 'dirs', o),
        () => sb.readLinesAsync('lines.txt', 1, 1, o),
      ]) {
        const e = await rejectsCode(call(), 'E_REQUEST')
        assert.match(e.message, /abortSignal/)
      }
    }
    await rejectsCode(sb.globAsync('*', 'dirs', { signal: AbortSignal.abort() }), 'E_REQUEST')
    const sync = { abortSignal: AbortSignal.abort() }
    assert.throws(() => sb.grep('x', 'grep', 1, sync), (e) => e.code === 'E_REQUEST' && /abortSignal/.test(e.message))
    assert.throws(() => sb.grepFound('x', 'grep', 1, sync), (e) => e.code === 'E_REQUEST' && /abortSignal/.test(e.message))
  })
})

// Node joins its pool's threads before it exits: a fetch in flight held
// `process.exit()` for as long as its timeout (20 s here) before the
// package aborted every pool call still running on 'exit'.
test('process.exit() is not held by a fetchAsync in flight, with or without a signal of its own', () => {
  const { spawnSync } = require('node:child_process')
  for (const withSignal of [false, true]) {
    const dir = tempDir()
    try {
      const script = `
        const fs = require('node:fs'), net = require('node:net'), path = require('node:path')
        const { Policy, Fetcher } = require(${JSON.stringify(path.join(__dirname, '..'))})
        const server = net.createServer((s) => s.on('data', () => {}))
        server.listen(0, '127.0.0.1', () => {
          const port = server.address().port
          const p = path.join(${JSON.stringify(dir)}, 'p.toml')
          fs.writeFileSync(p, '[net]\\nallow = ["127.0.0.1:' + port + '"]\\nallow_http = true\\n')
          const f = new Fetcher(Policy.load(p))
          const ac = new AbortController()
          const options = ${withSignal} ? { timeoutMs: 600000, abortSignal: ac.signal } : { timeoutMs: 600000 }
          f.fetchAsync('http://127.0.0.1:' + port + '/never', options).then(() => console.log('settled'))
          server.on('connection', () => setTimeout(() => process.exit(7), 100))
        })
      `
      // 60 s: the bound of a hang, not of speed (the fetch would wait 600 s).
      const r = spawnSync(process.execPath, ['-e', script], { timeout: 60000, encoding: 'utf8' })
      assert.equal(r.signal, null, `the child was still running after 60 s (stderr: ${r.stderr})`)
      assert.equal(r.status, 7, r.stderr)
      assert.ok(!r.stdout.includes('settled'), r.stdout)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
})

// exec's options are converted by napi-rs, which makes a reference to
// `abortSignal` when it reaches that field: a call refused after that
// (a bad `timeoutMs`, a command that is not a string) must release the
// reference, and no refused call may leave a listener on the signal, or a
// signal reused for many malformed calls is held (and heard) for ever.
describe('node2-23: exec refused with an abortSignal holds nothing of it', () => {
  test('node2-23_exec_refused_signal_released', async () => {
    const v8 = require('node:v8')
    const vm = require('node:vm')
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc')
    const { Executor } = require('..')
    const dir = tempDir()
    const ex = Executor.fromOptions({ write_root: dir, enabled: true, timeout_ms: 10000 })
    try {
      const refs = []
      const bad = [
        (signal) => ({ abortSignal: signal, cwd: 5 }),
        (signal) => ({ cwd: 5, abortSignal: signal }),
        (signal) => ({ abortSignal: signal, timeoutMs: -1 }),
        (signal) => ({ abortSignal: signal, timeoutMs: 'x' }),
        (signal) => ({ abortSignal: signal, bogus: 1 }),
      ]
      for (let i = 0; i < 40; i++) {
        const ac = counted()
        for (const o of bad) {
          await assert.rejects(Promise.resolve().then(() => ex.exec('true', o(ac.signal))), (e) => e.code === 'E_REQUEST')
        }
        await assert.rejects(Promise.resolve().then(() => ex.exec(5, { abortSignal: ac.signal })), (e) => e.code === 'E_REQUEST')
        assert.equal(listeners(ac.signal), 0, 'no listener left on the signal')
        refs.push(new WeakRef(ac.signal))
      }
      let alive = refs.length
      for (let i = 0; i < 20 && alive > 0; i++) {
        await sleep(10)
        gc()
        alive = refs.filter((r) => r.deref() !== undefined).length
      }
      assert.equal(alive, 0, 'every signal given to a refused exec can be collected')
    } finally {
      await ex.dispose()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

// A caller's `AbortSignal` whose `addEventListener` or `removeEventListener`
// throws. The wrapper (index.js) listened to it only after the call was
// made: the throw reached the caller, the operation ran on anyway (its
// budget spent), and its Promise, held by nobody, rejected unhandled,
// which ends the process. Removing the listener when a call ended threw
// from the call's completion, not from anything the caller called: an
// unhandled rejection (the wrapper) or an uncaught exception (exec's own
// listener), either way the end of the process. Each case runs in a child
// process, which such an exception would end.
describe('nodebind26: an abortSignal whose listener methods throw', () => {
  function runChild(dir, body) {
    const { spawnSync } = require('node:child_process')
    const script = `
      const { Sandbox, Executor } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const dir = ${JSON.stringify(dir)}
      process.on('unhandledRejection', (e) => { console.log('unhandled', e && e.code); process.exit(3) })
      const throwing = (method) => {
        const s = new AbortController().signal
        s[method] = () => { throw new Error(method + ' boom') }
        return s
      }
      ;(async () => { ${body} })().then(() => setTimeout(() => console.log('done'), 200))
    `
    return spawnSync(process.execPath, ['-e', script], { timeout: 60000, encoding: 'utf8' })
  }

  test('nodebind26_add_throws_before_the_call_runs', () => {
    const dir = tempDir()
    try {
      const r = runChild(
        dir,
        `const sb = new Sandbox({ readRoots: [dir], fsOps: 10 })
        for (const call of [
          (s) => sb.grepAsync('x', 'missing', undefined, { abortSignal: s }),
          (s) => sb.grepFoundAsync('x', 'missing', undefined, { abortSignal: s }),
          (s) => sb.globAsync('*', 'missing', { abortSignal: s }),
          (s) => sb.globFoundAsync('*', 'missing', { abortSignal: s }),
          (s) => sb.readLinesAsync('missing', 1, 1, { abortSignal: s }),
        ]) {
          try { call(throwing('addEventListener')); console.log('no throw') } catch (e) { console.log('threw', e.message) }
        }
        console.log('remaining', sb.fsOpsRemaining)`,
      )
      assert.equal(r.status, 0, r.stdout + r.stderr)
      assert.deepEqual(r.stdout.trim().split('\n'), [
        ...Array(5).fill('threw addEventListener boom'),
        'remaining 10',
        'done',
      ])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('nodebind26_remove_throws_the_call_still_settles', () => {
    const dir = tempDir()
    try {
      fs.writeFileSync(path.join(dir, 'a.txt'), 'x\n')
      const r = runChild(
        dir,
        `const sb = new Sandbox({ readRoots: [dir] })
        const found = await sb.grepAsync('x', '.', undefined, { abortSignal: throwing('removeEventListener') })
        console.log('grep', found.length)
        await sb.globAsync('*', 'missing', { abortSignal: throwing('removeEventListener') }).catch((e) => console.log('glob', e.code))
        const ex = Executor.fromOptions({ write_root: dir, enabled: true, timeout_ms: 20000 })
        const out = await ex.exec('echo ran', { abortSignal: throwing('removeEventListener') })
        console.log('exec', out.exitCode, out.stdout.trim())
        await ex.exec('true', { cwd: 'missing', abortSignal: throwing('removeEventListener') }).catch((e) => console.log('exec', e.code))
        await ex.dispose()`,
      )
      assert.equal(r.status, 0, r.stdout + r.stderr)
      assert.deepEqual(r.stdout.trim().split('\n'), [
        'grep 1',
        'glob E_NOT_FOUND',
        'exec 0 ran',
        'exec E_NOT_FOUND',
        'done',
      ])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
