'use strict'
// Every call the binding refuses itself (an argument of the wrong type, a
// lone surrogate no UTF-8 name can hold, a malformed option, an abort
// signal aborted before the call started) reaches the audit callback
// exactly once, as the sandbox's, executor's and fetcher's own refusals
// do and as C reports what it refuses at its boundary: `op`, `path` as
// given (a lone surrogate shown as U+FFFD, `''` for a value that is not
// a string, `'.'` for a search with no base) and the refusal's code. No
// budget is spent.

const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')

const { Policy, Sandbox, Executor, Fetcher } = require('..')

for (const k of ['HTTPS_PROXY', 'HTTP_PROXY', 'ALL_PROXY', 'https_proxy', 'http_proxy', 'all_proxy']) {
  delete process.env[k]
}

function tempDir() {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-audit-')))
}

/** Waits until `events` holds `n` events (they arrive on a later turn). */
async function settle(events, n) {
  for (let i = 0; i < 200 && events.length < n; i++) await sleep(10)
  await sleep(20) // room for an unexpected extra event to land
}

/** Each case whose events were not the ones expected: [name, heard]. */
function mismatches() {
  const wrong = []
  return {
    check(name, heard, expected) {
      if (JSON.stringify(heard) !== JSON.stringify(expected)) wrong.push([name, heard])
    },
    done() {
      const names = wrong.map(([name, heard]) => `${name}: ${JSON.stringify(heard)}`)
      assert.deepEqual(wrong, [], `not heard exactly once:\n${names.join('\n')}`)
    },
  }
}

/** The code `call` refuses with, thrown or rejected. */
async function codeOf(call) {
  try {
    await call()
  } catch (e) {
    assert.ok(e instanceof Error, 'an Error')
    return e.code
  }
  assert.fail('the call was not refused')
}

const aborted = () => AbortSignal.abort()

describe('nodeaudit23: refusals made by the binding are audited', () => {
  let dir
  let ws
  const events = []
  let sb
  before(() => {
    dir = tempDir()
    ws = path.join(dir, 'ws')
    fs.mkdirSync(path.join(ws, 'sub'), { recursive: true })
    fs.writeFileSync(path.join(ws, 'a.txt'), 'alpha\n')
    sb = new Sandbox({ readRoots: [ws], writeRoot: ws, fsOps: 1000, audit: (e) => events.push(e) })
  })
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  const L = 'a\uD800' // a lone surrogate
  const S = 'a\uFFFD' // as an audit event shows it
  // [name, call, op, path, code]
  const cases = [
    ['read lone', () => sb.read(L), 'read', S, 'E_REQUEST'],
    ['read number', () => sb.read(5), 'read', '', 'E_REQUEST'],
    ['read missing', () => sb.read(), 'read', '', 'E_REQUEST'],
    ['readAsync lone', () => sb.readAsync(L), 'read', S, 'E_REQUEST'],
    ['readText lone', () => sb.readText(L), 'read', S, 'E_REQUEST'],
    ['readTextAsync number', () => sb.readTextAsync(5), 'read', '', 'E_REQUEST'],
    ['readLines lone', () => sb.readLines(L), 'read', S, 'E_REQUEST'],
    ['readLines offset', () => sb.readLines('a.txt', -1), 'read', 'a.txt', 'E_REQUEST'],
    ['readLines limit', () => sb.readLines('a.txt', 1, 'x'), 'read', 'a.txt', 'E_REQUEST'],
    ['readLinesAsync lone', () => sb.readLinesAsync(L), 'read', S, 'E_REQUEST'],
    ['readLinesAsync offset', () => sb.readLinesAsync('a.txt', 1.5), 'read', 'a.txt', 'E_REQUEST'],
    ['readLinesAsync aborted', () => sb.readLinesAsync('a.txt', 1, 1, { abortSignal: aborted() }), 'read', 'a.txt', 'E_ABORTED'],
    ['readLinesAsync bad signal', () => sb.readLinesAsync('a.txt', 1, 1, { abortSignal: {} }), 'read', 'a.txt', 'E_REQUEST'],
    ['readLinesAsync bad option', () => sb.readLinesAsync('a.txt', 1, 1, { bogus: 1 }), 'read', 'a.txt', 'E_REQUEST'],
    ['write lone', () => sb.write(L, 'x'), 'write', S, 'E_REQUEST'],
    ['write data', () => sb.write('n.txt', 5), 'write', 'n.txt', 'E_REQUEST'],
    ['write option', () => sb.write('n.txt', 'x', { overwrite: 'yes' }), 'write', 'n.txt', 'E_REQUEST'],
    ['writeAsync lone', () => sb.writeAsync(L, 'x'), 'write', S, 'E_REQUEST'],
    ['writeAsync option', () => sb.writeAsync('n.txt', 'x', { bogus: true }), 'write', 'n.txt', 'E_REQUEST'],
    ['edit lone text', () => sb.edit('a.txt', L, 'b'), 'edit', 'a.txt', 'E_REQUEST'],
    ['edit lone path', () => sb.edit(L, 'a', 'b'), 'edit', S, 'E_REQUEST'],
    ['edit option', () => sb.edit('a.txt', 'a', 'b', { all: 'yes' }), 'edit', 'a.txt', 'E_REQUEST'],
    ['editAsync missing', () => sb.editAsync('a.txt', 'a'), 'edit', 'a.txt', 'E_REQUEST'],
    ['list lone', () => sb.list(L), 'list', S, 'E_REQUEST'],
    ['listAsync number', () => sb.listAsync(5), 'list', '', 'E_REQUEST'],
    ['stat lone', () => sb.stat(L), 'stat', S, 'E_REQUEST'],
    ['statAsync lone', () => sb.statAsync(L), 'stat', S, 'E_REQUEST'],
    ['mkdir lone', () => sb.mkdir(L), 'mkdir', S, 'E_REQUEST'],
    ['mkdirAsync number', () => sb.mkdirAsync(null), 'mkdir', '', 'E_REQUEST'],
    ['delete lone', () => sb.delete(L), 'delete', S, 'E_REQUEST'],
    ['deleteAsync lone', () => sb.deleteAsync(L), 'delete', S, 'E_REQUEST'],
    ['rename lone', () => sb.rename(L, 'b'), 'rename', `${S} -> b`, 'E_REQUEST'],
    ['rename number', () => sb.rename('a.txt', 5), 'rename', 'a.txt -> ', 'E_REQUEST'],
    ['renameAsync lone', () => sb.renameAsync('a.txt', L), 'rename', `a.txt -> ${S}`, 'E_REQUEST'],
    ['glob lone pattern', () => sb.glob(L), 'glob', '.', 'E_REQUEST'],
    ['glob lone base', () => sb.glob('*', L), 'glob', S, 'E_REQUEST'],
    ['glob number base', () => sb.glob('*', 5), 'glob', '', 'E_REQUEST'],
    ['globAsync aborted', () => sb.globAsync('*', 'sub', { abortSignal: aborted() }), 'glob', 'sub', 'E_ABORTED'],
    ['globAsync lone', () => sb.globAsync(L), 'glob', '.', 'E_REQUEST'],
    ['globFound lone', () => sb.globFound('*', L), 'glob', S, 'E_REQUEST'],
    ['globFoundAsync aborted', () => sb.globFoundAsync('*', null, { abortSignal: aborted() }), 'glob', '.', 'E_ABORTED'],
    ['globFoundAsync bad signal', () => sb.globFoundAsync('*', 'sub', { abortSignal: 5 }), 'glob', 'sub', 'E_REQUEST'],
    ['grep lone', () => sb.grep(L), 'grep', '.', 'E_REQUEST'],
    ['grep maxResults', () => sb.grep('x', 'sub', -1), 'grep', 'sub', 'E_REQUEST'],
    ['grep mode', () => sb.grep('x', undefined, undefined, { mode: 'bogus' }), 'grep', '.', 'E_REQUEST'],
    ['grep option', () => sb.grep('x', 'sub', 5, { bogus: 1 }), 'grep', 'sub', 'E_REQUEST'],
    ['grepAsync aborted', () => sb.grepAsync('x', 'sub', 5, { abortSignal: aborted() }), 'grep', 'sub', 'E_ABORTED'],
    ['grepAsync context', () => sb.grepAsync('x', null, 5, { mode: 'files', before: 1 }), 'grep', '.', 'E_REQUEST'],
    ['grepFound lone base', () => sb.grepFound('x', L), 'grep', S, 'E_REQUEST'],
    ['grepFoundAsync aborted', () => sb.grepFoundAsync('x', null, null, { abortSignal: aborted() }), 'grep', '.', 'E_ABORTED'],
    ['grepFoundAsync lone glob', () => sb.grepFoundAsync('x', 'sub', null, { glob: L }), 'grep', 'sub', 'E_REQUEST'],
  ]

  test('nodeaudit23: each Sandbox method refused by the binding yields exactly one event', async () => {
    const m = mismatches()
    for (const [name, call, op, shown, code] of cases) {
      await sleep(10)
      events.length = 0
      const budget = sb.fsOpsRemaining
      assert.equal(await codeOf(call), code, name)
      // A call the sandbox runs, after: its event follows the refusal's.
      sb.stat('a.txt')
      await settle(events, 2)
      m.check(
        name,
        events.map((e) => [e.op, e.path, e.outcome, e.size ?? null]),
        [
          [op, shown, code, null],
          ['stat', 'a.txt', 'OK', null],
        ],
      )
      assert.equal(sb.fsOpsRemaining, budget - 1, `${name}: the refusal spent no budget`)
    }
    m.done()
  })

  test('nodeaudit23: a refusal on a closed sandbox is E_CLOSED, audited once', async () => {
    const seen = []
    const closed = new Sandbox({ readRoots: [ws], audit: (e) => seen.push(e) })
    closed.close()
    assert.equal(await codeOf(() => closed.read(5)), 'E_CLOSED')
    assert.equal(await codeOf(() => closed.globAsync('*', null, { abortSignal: aborted() })), 'E_CLOSED')
    assert.equal(await codeOf(() => closed.read('a.txt')), 'E_CLOSED')
    await settle(seen, 3)
    assert.deepEqual(
      seen.map((e) => [e.op, e.path, e.outcome]),
      [
        ['read', '', 'E_CLOSED'],
        ['glob', '.', 'E_CLOSED'],
        ['read', 'a.txt', 'E_CLOSED'],
      ],
    )
  })

  test('nodeaudit23: each exec refused at the call yields exactly one event', async () => {
    fs.writeFileSync(path.join(dir, 'policy.toml'), '[fs]\nwrite_root = "ws"\n[exec]\nenabled = true\n')
    const seen = []
    const ex = new Executor(Policy.load(path.join(dir, 'policy.toml')), { audit: (e) => seen.push(e) })
    try {
      const refused = [
        [() => ex.exec(5), ''],
        [() => ex.exec(), ''],
        [() => ex.exec(5, { cwd: 'sub' }), 'sub'],
        [() => ex.exec('true', { timeoutMs: -1 }), ''],
        [() => ex.exec('true', { cwd: 'sub', timeoutMs: 1.5 }), 'sub'],
        [() => ex.exec('true', { cwd: 'sub', abortSignal: {} }), 'sub'],
        [() => ex.exec('true', { cwd: 'sub', bogus: 1 }), ''],
        [() => ex.exec('true', { cwd: 5 }), ''],
        [() => ex.exec('true', 'sub'), ''],
      ]
      const m = mismatches()
      for (const [call, cwd] of refused) {
        await sleep(10)
        seen.length = 0
        assert.equal(await codeOf(call), 'E_REQUEST', call.toString())
        assert.equal((await ex.exec('exit 4')).exitCode, 4)
        await settle(seen, 2)
        m.check(
          call.toString(),
          seen.map((e) => [e.op, e.path, e.outcome, e.exitCode ?? null]),
          [
            ['exec', cwd, 'E_REQUEST', null],
            ['exec', '', 'OK', 4],
          ],
        )
      }
      m.done()
    } finally {
      await ex.dispose()
    }
  })

  test('nodeaudit23: each fetch refused by the binding yields exactly one event', async () => {
    fs.writeFileSync(
      path.join(dir, 'net.toml'),
      '[net]\nallow = ["127.0.0.1:9"]\nallow_http = true\n[budgets]\nnet_ops = 3\n',
    )
    const seen = []
    const f = new Fetcher(Policy.load(path.join(dir, 'net.toml')), { audit: (e) => seen.push(e) })
    const url = 'http://127.0.0.1:9/x'
    const refused = [
      [() => f.fetch(5), '', 'E_REQUEST'],
      [() => f.fetch('http://a\uD800/'), '', 'E_REQUEST'],
      [() => f.fetch(url, { timeoutMs: 0 }), 'http://127.0.0.1:9', 'E_REQUEST'],
      [() => f.fetch(url, { bogus: 1 }), 'http://127.0.0.1:9', 'E_REQUEST'],
      [() => f.fetchAsync(5), '', 'E_REQUEST'],
      [() => f.fetchAsync(url, { maxBytes: -1 }), 'http://127.0.0.1:9', 'E_REQUEST'],
      [() => f.fetchAsync(url, { abortSignal: aborted() }), 'http://127.0.0.1:9', 'E_ABORTED'],
      [() => f.fetchAsync(url, { abortSignal: 'no' }), 'http://127.0.0.1:9', 'E_REQUEST'],
    ]
    const m = mismatches()
    for (const [call, shown, code] of refused) {
      seen.length = 0
      assert.equal(await codeOf(call), code, call.toString())
      await settle(seen, 1)
      m.check(call.toString(), seen.map((e) => [e.op, e.path, e.outcome]), [['fetch', shown, code]])
    }
    m.done()
    assert.equal(f.netOpsRemaining, 3, 'no refusal here spent net_ops')
  })
})
