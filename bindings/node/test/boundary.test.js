'use strict'
// Arguments at the JavaScript boundary: numbers and strings that Node-API
// would convert silently (a number to u32 modulo 2**32, a lone surrogate to
// U+FFFD) are refused with E_REQUEST naming the argument, never guessed.

const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { Root, Sandbox, Policy, Executor, Fetcher } = require('..')

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

  test('bindcons21: Root modes with setuid, setgid or sticky bits are E_REQUEST, as in Go', () => {
    const root = Root.open(ws)
    try {
      for (const mode of [0o4755, 0o2755, 0o1777, 0o7777]) {
        const named = new RegExp('mode` 0o' + mode.toString(8) + ': unsupported file mode')
        throwsRequest(() => root.mkdir('s', mode), named)
        throwsRequest(() => root.mkdir('s/t', mode, true), named)
        throwsRequest(() => root.openFile('s.txt', 'w', mode), named)
      }
      assert.deepEqual(fs.readdirSync(ws).sort(), ['a.txt'])
      fs.closeSync(root.openFile('s.txt', 'w', 0o777))
      assert.equal(fs.statSync(path.join(ws, 's.txt')).mode & 0o7000, 0)
      fs.rmSync(path.join(ws, 's.txt'))
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

// Node-API's UTF-8 conversion writes U+FFFD for a lone surrogate without a
// word: 'a\uD800b' would name the file 'a\uFFFDb', a deny pattern
// 's\uD800*' would protect 's\uFFFD*' instead, an edit would replace a
// real U+FFFD. Every such string argument is E_REQUEST naming it; real
// U+FFFD and surrogate pairs are names like any other.
describe('lone surrogates are refused, not replaced by U+FFFD', () => {
  const LONE = ['a\uD800b', 'a\uDC00', '\uD800', 'x\uDBFF\uDBFFy']

  test('Sandbox names, patterns, edit texts and options', async () => {
    fs.writeFileSync(path.join(ws, 'a\uFFFDb'), 'old \uFFFD text\n')
    fs.mkdirSync(path.join(dir, 'w\uFFFD'), { recursive: true })
    try {
      const sb = new Sandbox({ readRoots: [ws], writeRoot: ws, allowOverwrite: true })
      for (const bad of LONE) {
        throwsRequest(() => sb.write(bad, 'x'), 'path')
        await rejectsRequest(sb.writeAsync(bad, 'x'), 'path')
        throwsRequest(() => sb.mkdir(bad), 'path')
        throwsRequest(() => sb.read(bad), 'path')
        await rejectsRequest(sb.readAsync(bad), 'path')
        throwsRequest(() => sb.readText(bad), 'path')
        throwsRequest(() => sb.readLines(bad), 'path')
        throwsRequest(() => sb.stat(bad), 'path')
        throwsRequest(() => sb.list(bad), 'path')
        throwsRequest(() => sb.delete(bad), 'path')
        throwsRequest(() => sb.rename('a.txt', bad), 'to')
        throwsRequest(() => sb.rename(bad, 'z'), 'from')
        throwsRequest(() => sb.glob(bad), 'pattern')
        throwsRequest(() => sb.glob('*', bad), 'path')
        throwsRequest(() => sb.grep(bad), 'pattern')
        await rejectsRequest(sb.grepAsync(bad), 'pattern')
        throwsRequest(() => sb.grep('x', undefined, undefined, { glob: bad }), 'glob')
        throwsRequest(() => sb.edit('a\uFFFDb', bad, 'y'), 'oldText')
        throwsRequest(() => sb.edit('a\uFFFDb', 'old', bad), 'newText')
        await rejectsRequest(sb.editAsync('a\uFFFDb', bad, 'y'), 'oldText')
        throwsRequest(() => sb.hostName(path.join(ws, bad)), 'path')
        throwsRequest(() => new Sandbox({ readRoots: [ws, path.join(dir, 'w' + bad)] }), 'readRoots')
        throwsRequest(() => new Sandbox({ writeRoot: path.join(dir, 'w' + bad) }), 'writeRoot')
        throwsRequest(() => new Sandbox({ writeRoot: ws, denyWrite: ['s' + bad + '*'] }), 'denyWrite')
      }
      assert.equal(fs.readFileSync(path.join(ws, 'a\uFFFDb'), 'utf8'), 'old \uFFFD text\n')
      assert.deepEqual(fs.readdirSync(ws).sort(), ['a.txt', 'a\uFFFDb'])
      // A real U+FFFD and a surrogate pair are ordinary characters.
      assert.equal(sb.readText('a\uFFFDb'), 'old \uFFFD text\n')
      assert.equal(sb.edit('a\uFFFDb', '\uFFFD', '\u{1F600}'), 1)
      assert.equal(sb.write('\u{1F600}.txt', '\u{1F600}'), 4)
      assert.equal(fs.readFileSync(path.join(ws, '\u{1F600}.txt'), 'utf8'), '\u{1F600}')
      assert.deepEqual(sb.glob('*\u{1F600}*'), ['\u{1F600}.txt'])
      sb.close()
    } finally {
      for (const n of ['a\uFFFDb', '\u{1F600}.txt']) fs.rmSync(path.join(ws, n), { force: true })
      fs.rmSync(path.join(dir, 'w\uFFFD'), { recursive: true, force: true })
    }
  })

  test('Root paths, the fast stat included', () => {
    fs.writeFileSync(path.join(ws, 'a\uFFFDb'), 'x')
    fs.mkdirSync(path.join(dir, 'w\uFFFD'), { recursive: true })
    const root = Root.open(ws)
    try {
      for (const bad of LONE) {
        throwsRequest(() => Root.open(path.join(dir, 'w' + bad)), 'dir')
        throwsRequest(() => root.stat(bad), 'path')
        throwsRequest(() => root.lstat(bad), 'path')
        // Past the stack buffer of the fast stat, too.
        throwsRequest(() => root.stat('d/'.repeat(600) + bad), 'path')
        throwsRequest(() => root.openFile(bad, 'w'), 'path')
        throwsRequest(() => root.mkdir(bad), 'path')
        throwsRequest(() => root.remove(bad), 'path')
        throwsRequest(() => root.readlink(bad), 'path')
        throwsRequest(() => root.readdir(bad), 'path')
        throwsRequest(() => root.rename('a.txt', bad), 'to')
        throwsRequest(() => root.rename(bad, 'z'), 'from')
      }
      assert.deepEqual(fs.readdirSync(ws).sort(), ['a.txt', 'a\uFFFDb'])
      assert.equal(root.stat('a\uFFFDb').size, 1)
      assert.equal(root.lstat('a\uFFFDb').kind, 'file')
    } finally {
      root.close()
      fs.rmSync(path.join(ws, 'a\uFFFDb'), { force: true })
      fs.rmSync(path.join(dir, 'w\uFFFD'), { recursive: true, force: true })
    }
  })

  test('policy options and the executor', async () => {
    for (const bad of LONE) {
      throwsRequest(() => Policy.fromOptions({ write_root: ws, deny_write: ['s' + bad + '*'] }), 'deny_write')
      throwsRequest(() => Policy.fromOptions({ write_root: path.join(dir, 'w' + bad) }), 'write_root')
      throwsRequest(() => Policy.fromOptions({ ['write_root' + bad]: ws }), 'options')
      throwsRequest(() => Executor.fromOptions({ write_root: ws, env_inherit: [bad] }), 'env_inherit')
      throwsRequest(() => Policy.parse('[fs]\nwrite_root = "' + bad + '"\n', dir), 'text')
    }
    const x = Executor.fromOptions({ write_root: ws, enabled: true, timeout_ms: 10000 })
    try {
      for (const bad of LONE) {
        await rejectsRequest(x.exec('echo "' + bad + '"'), 'command')
        await rejectsRequest(x.exec('pwd', { cwd: bad }), 'cwd')
      }
      const r = await x.exec('printf %s "\u{1F600}\uFFFD"')
      assert.equal(r.stdout, '\u{1F600}\uFFFD')
    } finally {
      await x.dispose()
    }
  })
})

// The other way: a name or a link target on disk that is not UTF-8 has no
// exact JavaScript string. Its lossy spelling (U+FFFD for each stray byte)
// can be a real name of its own, which a caller acting on a listing would
// reach instead: such an answer is E_PATH_INVALID naming the bytes, never
// the lossy spelling.
describe('names on disk that are not UTF-8 are not answered lossily', () => {
  test('Root readdir and readlink', () => {
    const sub = path.join(ws, 'raw')
    fs.mkdirSync(sub)
    const stray = Buffer.concat([Buffer.from(sub + '/a'), Buffer.from([0xff])])
    fs.writeFileSync(stray, 'not the one')
    fs.writeFileSync(path.join(sub, 'a\uFFFD'), 'another file')
    fs.symlinkSync(Buffer.from([0x62, 0xfe]), Buffer.concat([Buffer.from(sub + '/l')]))
    const root = Root.open(ws)
    try {
      for (const [fn, bytes] of [[() => root.readdir('raw'), 'raw/a\\\\xff'], [() => root.readlink('raw/l'), 'b\\\\xfe']]) {
        assert.throws(fn, (e) => {
          assert.equal(e.code, 'E_PATH_INVALID', e.message)
          assert.match(e.message, new RegExp(bytes), e.message)
          assert.match(e.message, /not UTF-8/, e.message)
          return true
        })
      }
      fs.rmSync(stray)
      fs.rmSync(path.join(sub, 'l'))
      assert.deepEqual(root.readdir('raw'), ['a\uFFFD'])
    } finally {
      root.close()
      fs.rmSync(sub, { recursive: true, force: true })
    }
  })
})

describe('fetch headers with a lone surrogate', () => {
  // Before any connection: a value would be sent with U+FFFD in its place,
  // a name with one would be dropped from the request without a word.
  test('are E_REQUEST, sync and async, with no hops', async () => {
    const f = new Fetcher(Policy.parse('[net]\nallow = ["127.0.0.1:9"]\nallow_http = true\n', dir))
    for (const headers of [{ 'X-A': 'a\uD800' }, { 'X-A\uDC00': 'v' }, { 'X-A': 'ok', 'X-B': '\uD800' }]) {
      const check = (e) => {
        assert.equal(e.code, 'E_REQUEST', e.message)
        assert.match(e.message, /headers/)
        assert.deepEqual(e.hops, [])
        return true
      }
      assert.throws(() => f.fetch('http://127.0.0.1:9/', { headers, timeoutMs: 2000 }), check)
      await assert.rejects(f.fetchAsync('http://127.0.0.1:9/', { headers, timeoutMs: 2000 }), check)
    }
    assert.equal(f.netOpsRemaining, null)
  })

  test('an unknown fetch option is E_REQUEST, not ignored', async () => {
    const f = new Fetcher(Policy.parse('[net]\nallow = ["127.0.0.1:9"]\nallow_http = true\n', dir))
    for (const o of [{ timeout_ms: 1 }, { max_bytes: 1 }, { header: { 'X-A': 'v' } }]) {
      const check = (e) => e.code === 'E_REQUEST' && e.message.includes(Object.keys(o)[0]) && e.hops.length === 0
      assert.throws(() => f.fetch('http://127.0.0.1:9/', o), check)
      await assert.rejects(f.fetchAsync('http://127.0.0.1:9/', o), check)
    }
  })
})

// napi-rs reads the fields of an options object it knows and ignores the
// rest: new Sandbox({ writeRoot, deny_write: ['*.env'] }) (the policy
// file's spelling) granted writes with no deny pattern at all, and a
// string given as the options granted a sandbox of defaults. An unknown
// option, or options that are not an object, are E_REQUEST naming them.
describe('options objects', () => {
  test('new Sandbox refuses an unknown option instead of ignoring it', () => {
    for (const extra of [{ deny_write: ['*.env'] }, { max_write_bytes: 1 }, { fs_ops: 0 }, { denywrite: ['*.env'] }]) {
      throwsRequest(() => new Sandbox({ writeRoot: ws, ...extra }), Object.keys(extra)[0])
    }
    throwsRequest(() => new Sandbox('/tmp'), 'options')
    throwsRequest(() => new Sandbox(7), 'options')
    assert.equal(fs.existsSync(path.join(ws, '.env')), false)
    // Known options, undefined and null are as before.
    const sb = new Sandbox({ writeRoot: ws, denyWrite: ['*.env'], audit: undefined })
    assert.throws(() => sb.write('.env', 'x'), (e) => e.code === 'E_FS_PROTECTED')
    new Sandbox(undefined).close()
    new Sandbox(null).close()
    new Sandbox().close()
  })

  // The smaller options objects read their fields the same way: a
  // misspelt `overwite`, `{ wrte: true }` or the snake_case `case_insensitive`
  // did nothing, and the call went on with the default.
  test('every other options object refuses an unknown option', async () => {
    const sb = new Sandbox({ readRoots: [ws], writeRoot: ws, allowOverwrite: true })
    try {
      const bad = [
        ['write', () => sb.write('a.txt', 'x', { overWrite: true }), 'overWrite'],
        ['write', () => sb.write('w.txt', 'x', 'overwrite'), 'options'],
        ['hostName', () => sb.hostName(path.join(ws, 'a.txt'), { wrte: true }), 'wrte'],
        ['edit', () => sb.edit('a.txt', 'l1', 'L1', { replaceAll: true }), 'replaceAll'],
        ['grep', () => sb.grep('l', undefined, undefined, { case_insensitive: true }), 'case_insensitive'],
        ['grep', () => sb.grep('l', undefined, undefined, { globs: '*.md' }), 'globs'],
        ['fromPolicy', () => Sandbox.fromPolicy(Policy.parse('', ws), { audt: () => {} }), 'audt'],
        ['Executor', () => new Executor(Policy.parse('', ws), { onAudit: () => {} }), 'onAudit'],
        ['Executor.fromOptions', () => Executor.fromOptions({ write_root: ws }, ws, { Audit: () => {} }), 'Audit'],
      ]
      for (const [, fn, key] of bad) throwsRequest(fn, key)
      await rejectsRequest(sb.writeAsync('a.txt', 'x', { overWrite: true }), 'overWrite')
      await rejectsRequest(sb.editAsync('a.txt', 'l1', 'L1', { replaceAll: true }), 'replaceAll')
      await rejectsRequest(sb.grepAsync('l', undefined, undefined, { case_insensitive: true }), 'case_insensitive')
      // Nothing was written or edited.
      assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'l1\nl2\nl3\nl4\nl5\n')
      assert.equal(fs.existsSync(path.join(ws, 'w.txt')), false)
      // Known options, undefined and null are as before.
      assert.equal(sb.write('a.txt', 'l1\nl2\nl3\nl4\nl5\n', { overwrite: true }), 15)
      assert.equal(sb.hostName(path.join(ws, 'a.txt'), { write: true }), 'a.txt')
      assert.equal(sb.edit('a.txt', 'l', 'l', { all: true }), 5)
      assert.equal(sb.grep('L2', undefined, undefined, { caseInsensitive: true }).length, 1)
      assert.equal(sb.grep('l2', undefined, undefined, null).length, 1)
      assert.equal(sb.write('n.txt', 'x', undefined), 1)
      Sandbox.fromPolicy(Policy.parse('', ws), { audit: undefined }).close()
      new Executor(Policy.parse('', ws), null).disposeSync()
    } finally {
      sb.close()
    }
  })

  test('exec refuses an unknown option instead of ignoring it', async () => {
    const x = Executor.fromOptions({ write_root: ws, enabled: true, timeout_ms: 10000 })
    try {
      // Thrown at the call, like a malformed timeoutMs or abortSignal.
      throwsRequest(() => x.exec('true', { timeout_ms: 1 }), 'timeout_ms')
      throwsRequest(() => x.exec('true', { signal: AbortSignal.abort() }), 'signal')
      throwsRequest(() => x.exec('true', 'cwd'), 'options')
      assert.equal((await x.exec('true', { cwd: undefined, timeoutMs: 5000 })).exitCode, 0)
      assert.equal((await x.exec('true', null)).exitCode, 0)
    } finally {
      await x.dispose()
    }
  })
})

// napi-rs converts a declared argument type itself and throws its own
// error: code 'StringExpected', 'NumberExpected', 'InvalidArg', a message
// naming no argument ("Failed to convert napi `utf16 string` into rust
// type `String`"). A wrong type or a missing argument is E_REQUEST naming
// the argument, like every other malformed call and like the other
// bindings; the async twins reject.
describe('arguments of the wrong type', () => {
  test('are E_REQUEST naming the argument, sync and async', async () => {
    const sb = new Sandbox({ readRoots: [ws], writeRoot: ws, allowOverwrite: true })
    const root = Root.open(ws)
    const policy = Policy.parse('', ws)
    const entries = fs.readdirSync(ws).sort()
    try {
      const sync = [
        [() => sb.read(5), 'path'],
        [() => sb.read(), 'path'],
        [() => sb.readText({}), 'path'],
        [() => sb.readLines(null), 'path'],
        [() => sb.readLines('a.txt', '2'), 'offset'],
        [() => sb.readLines('a.txt', 1, true), 'limit'],
        [() => sb.write('w.txt', 5), 'data'],
        [() => sb.write('w.txt'), 'data'],
        [() => sb.write(7, 'x'), 'path'],
        [() => sb.edit('a.txt', 1, 'x'), 'oldText'],
        [() => sb.edit('a.txt', 'l1'), 'newText'],
        [() => sb.list(1), 'path'],
        [() => sb.stat([]), 'path'],
        [() => sb.mkdir(1), 'path'],
        [() => sb.delete(1), 'path'],
        [() => sb.rename('a.txt', 2), 'to'],
        [() => sb.glob(5), 'pattern'],
        [() => sb.glob('*', 5), 'path'],
        [() => sb.grep(5), 'pattern'],
        [() => sb.grep('l', 5), 'path'],
        [() => sb.grep('l', '.', '10'), 'maxResults'],
        [() => sb.grep('l', '.', 10, { caseInsensitive: 'yes' }), 'caseInsensitive'],
        [() => sb.hostName(5), 'path'],
        [() => new Sandbox({ readRoots: ws }), 'readRoots'],
        [() => new Sandbox({ allowOverwrite: 'yes' }), 'allowOverwrite'],
        [() => Sandbox.fromPolicy({}), 'policy'],
        [() => Sandbox.fromPolicy(), 'policy'],
        [() => Root.open(5), 'dir'],
        [() => root.openFile(5), 'path'],
        [() => root.openFile('a.txt', 5), 'flags'],
        [() => root.mkdir('d', '0755'), 'mode'],
        [() => root.mkdir('d', 0o755, 'yes'), 'recursive'],
        [() => root.remove(5), 'path'],
        [() => root.stat(5), 'path'],
        [() => root.lstat(), 'path'],
        [() => root.readlink(5), 'path'],
        [() => root.rename('a.txt', 5), 'to'],
        [() => root.readdir(5), 'path'],
        [() => Policy.load(5), 'path'],
        [() => Policy.parse(5, ws), 'text'],
        [() => Policy.parse('', 5), 'baseDir'],
        [() => Policy.fromOptions({}, 5), 'baseDir'],
        [() => new Executor({}), 'policy'],
        [() => new Fetcher('x'), 'policy'],
      ]
      for (const [fn, what] of sync) throwsRequest(fn, what)
      const ex = new Executor(policy)
      try {
        throwsRequest(() => ex.exec(5), 'command')
        throwsRequest(() => ex.exec('true', { cwd: 5 }), 'cwd')
      } finally {
        ex.disposeSync()
      }
      const f = new Fetcher(policy)
      throwsRequest(() => f.fetch(5), 'url')
      const async = [
        [() => sb.readAsync(5), 'path'],
        [() => sb.readTextAsync(), 'path'],
        [() => sb.readLinesAsync('a.txt', '1'), 'offset'],
        [() => sb.writeAsync('w.txt', 5), 'data'],
        [() => sb.editAsync('a.txt', 'l1', 5), 'newText'],
        [() => sb.listAsync(5), 'path'],
        [() => sb.statAsync(5), 'path'],
        [() => sb.mkdirAsync(5), 'path'],
        [() => sb.deleteAsync(5), 'path'],
        [() => sb.renameAsync(5, 'b'), 'from'],
        [() => sb.globAsync(5), 'pattern'],
        [() => sb.grepAsync('l', '.', 'all'), 'maxResults'],
        [() => f.fetchAsync(5), 'url'],
      ]
      for (const [fn, what] of async) await rejectsRequest(fn(), what)
      // Nothing was written, moved or created.
      assert.deepEqual(fs.readdirSync(ws).sort(), entries)
      // Right types, and undefined or null for an optional argument, are as before.
      assert.equal(sb.readLines('a.txt', undefined, null).lines, 5)
      assert.deepEqual(sb.glob('a.txt', null), ['a.txt'])
      assert.equal(sb.write('w.txt', Buffer.from('xy')), 2)
      assert.equal(await sb.writeAsync('w.txt', 'xyz', { overwrite: true }), 3)
      assert.equal(sb.grep('l1', undefined, undefined).length, 1)
      sb.delete('w.txt')
    } finally {
      sb.close()
      root.close()
    }
  })
})

// fromOptions converted its options with napi-rs' JSON conversion and let
// its error through: a missing options object or a function in it threw
// 'InvalidArg' ("undefined cannot be represented as a serde_json::Value").
describe('fromOptions with options JSON cannot hold', () => {
  test('is E_REQUEST naming the options', () => {
    for (const fn of [
      () => Policy.fromOptions(),
      () => Policy.fromOptions(undefined, ws),
      () => Policy.fromOptions({ write_root: ws, audit: () => {} }),
      () => Executor.fromOptions(),
      () => Executor.fromOptions({ write_root: ws, enabled: Symbol('x') }),
    ]) {
      throwsRequest(fn, 'options')
    }
    assert.match(Policy.fromOptions({ write_root: ws }, ws).digest, /^sha256:/)
  })
})

// A JavaScript number is a double: napi-rs' JSON conversion made an
// integer past 2 ** 32 - 1 a float, and the options refused it ("invalid
// type: floating point `8589934592.0`, expected u64"), where the policy
// file takes 8 GiB of memory or a budget of 5e9. An integer up to
// Number.MAX_SAFE_INTEGER is an integer; past it a number may not be the
// one written (2 ** 53 + 1 === 2 ** 53), and is refused naming the key
// (a BigInt states it exactly).
describe('fromOptions numbers', () => {
  test('an integer past 2 ** 32 is taken as the file takes it', () => {
    const p = Policy.fromOptions({ write_root: ws, enabled: true, max_memory_bytes: 8 * 2 ** 30, fs_ops: 5e9 }, ws)
    assert.equal(p.summary.exec.max_memory_bytes, 8 * 2 ** 30)
    assert.equal(p.summary.budgets.fs_ops, 5e9)
    const x = Executor.fromOptions({ write_root: ws, enabled: true, max_memory_bytes: Number.MAX_SAFE_INTEGER })
    assert.equal(x.enabled, true)
    assert.equal(Policy.fromOptions({ write_root: ws, fs_ops: 2n ** 60n }, ws).summary.budgets.fs_ops, 2n ** 60n)
  })
  test('a number that is not an exact integer is refused naming the key', () => {
    for (const [options, key] of [
      [{ timeout_ms: 1.5 }, 'exec.timeout_ms'],
      [{ timeout_ms: -1 }, 'exec.timeout_ms'],
      [{ max_memory_bytes: 2 ** 53 }, 'exec.max_memory_bytes'],
      [{ exec: { max_tasks: 1e300 } }, 'exec.max_tasks'],
      [{ fs_ops: -(2 ** 40) }, 'budgets.fs_ops'],
    ]) {
      assert.throws(
        () => Policy.fromOptions({ write_root: ws, enabled: true, ...options }, ws),
        (e) => {
          assert.equal(e.code, 'E_POLICY', e.message)
          assert.equal(e.key, key, e.message)
          return true
        },
      )
    }
  })
})

// The lone-surrogate check read a string option again, apart from the
// conversion that is used: a getter answering 'w\uD800' first (converted
// to 'w\uFFFD' without a word) and 'w\uFFFD' the second time passed the
// check, and the policy granted the directory 'w\uFFFD', which the value
// used never named. Each property is now read once, and that read is the
// one judged and used: its lone surrogate is refused (E_REQUEST naming it).
describe('fromOptions with a value that changes between reads', () => {
  test('is read once, and its lone surrogate refused, never granted as U+FFFD', () => {
    fs.mkdirSync(path.join(ws, '..', 'w\uFFFD'), { recursive: true })
    for (const make of [
      (get) => ({ get write_root() { return get() } }),
      (get) => ({ fs: { get write_root() { return get() } } }),
      (get) => ({ read_roots: [ws], get write_root() { return get() } }),
    ]) {
      let n = 0
      const get = () => (++n === 1 ? path.join(ws, '..', 'w\uD800') : path.join(ws, '..', 'w\uFFFD'))
      throwsRequest(() => Policy.fromOptions(make(get), ws), 'write_root')
      assert.equal(n, 1, 'the getter ran once')
    }
    // A value read the same each time is taken.
    const steady = { get write_root() { return path.join(ws, '..', 'w\uFFFD') } }
    assert.equal(Policy.fromOptions(steady, ws).summary.write_root, path.join(path.dirname(ws), 'w\uFFFD'))
  })
})

// File content and request bodies given as strings. Node-API's UTF-8
// conversion wrote U+FFFD (ef bf bd) for a lone surrogate without a word:
// sb.write('s.txt', 'a\uD800b') wrote 61 ef bf bd 62, bytes the caller did
// not give, while edit refused the same string in its text. Every string
// the binding turns into file content or request bytes now follows one
// rule: a lone surrogate is E_REQUEST naming the argument, nothing is
// written or sent, and the refusal reaches the audit callback once. A
// Buffer or Uint8Array still writes any bytes.
describe('node2-23: content strings with a lone surrogate', () => {
  const LONE = ['a\uD800b', 'a\uDC00', '\uD800', 'x\uDBFF\uDBFFy']
  const settle = async (events, n) => {
    for (let i = 0; i < 200 && events.length < n; i++) await new Promise((r) => setTimeout(r, 10))
    await new Promise((r) => setTimeout(r, 20))
  }

  test('node2-23_write_content_lone_surrogate_refused', async () => {
    const events = []
    const sb = new Sandbox({ readRoots: [ws], writeRoot: ws, allowOverwrite: true, audit: (e) => events.push(e) })
    fs.writeFileSync(path.join(ws, 'keep.txt'), 'kept')
    try {
      for (const bad of LONE) {
        events.length = 0
        throwsRequest(() => sb.write('s.txt', bad), 'data')
        await rejectsRequest(sb.writeAsync('s.txt', bad), 'data')
        throwsRequest(() => sb.write('keep.txt', bad, { overwrite: true }), 'data')
        await rejectsRequest(sb.writeAsync('keep.txt', bad, { overwrite: true }), 'data')
        await settle(events, 4)
        assert.deepEqual(
          events.map((e) => [e.op, e.path, e.outcome]),
          [
            ['write', 's.txt', 'E_REQUEST'],
            ['write', 's.txt', 'E_REQUEST'],
            ['write', 'keep.txt', 'E_REQUEST'],
            ['write', 'keep.txt', 'E_REQUEST'],
          ],
        )
      }
      assert.equal(fs.existsSync(path.join(ws, 's.txt')), false, 'nothing written')
      assert.equal(fs.readFileSync(path.join(ws, 'keep.txt'), 'utf8'), 'kept', 'nothing overwritten')
      // Bytes are bytes: a Buffer or Uint8Array is written as given, the
      // encoded surrogate (ed a0 80, not UTF-8) included; a real U+FFFD
      // and a surrogate pair are ordinary characters.
      const raw = Buffer.from([0x61, 0xed, 0xa0, 0x80, 0x62])
      assert.equal(sb.write('b.bin', raw), 5)
      assert.deepEqual(fs.readFileSync(path.join(ws, 'b.bin')), raw)
      assert.equal(await sb.writeAsync('u.bin', new Uint8Array(raw)), 5)
      assert.deepEqual(fs.readFileSync(path.join(ws, 'u.bin')), raw)
      assert.equal(sb.write('f.txt', 'a\uFFFDb\u{1F600}'), 9)
      assert.deepEqual([...fs.readFileSync(path.join(ws, 'f.txt'))], [0x61, 0xef, 0xbf, 0xbd, 0x62, 0xf0, 0x9f, 0x98, 0x80])
      sb.close()
    } finally {
      for (const n of ['s.txt', 'keep.txt', 'b.bin', 'u.bin', 'f.txt']) fs.rmSync(path.join(ws, n), { force: true })
    }
  })

  test('node2-23_fetch_body_and_method_lone_surrogate_refused', async () => {
    const events = []
    const f = new Fetcher(Policy.parse('[net]\nallow = ["127.0.0.1:9"]\nallow_http = true\n[budgets]\nnet_ops = 5\n', dir), {
      audit: (e) => events.push(e),
    })
    for (const bad of LONE) {
      for (const [o, what] of [[{ method: 'POST', body: bad }, 'body'], [{ method: 'P' + bad }, 'method']]) {
        events.length = 0
        const check = (e) => {
          assert.equal(e.code, 'E_REQUEST', e.message)
          assert.match(e.message, new RegExp(what), e.message)
          assert.deepEqual(e.hops, [])
          return true
        }
        assert.throws(() => f.fetch('http://127.0.0.1:9/', { ...o, timeoutMs: 2000 }), check)
        await assert.rejects(f.fetchAsync('http://127.0.0.1:9/', { ...o, timeoutMs: 2000 }), check)
        await settle(events, 2)
        assert.deepEqual(
          events.map((e) => [e.op, e.path, e.outcome]),
          [
            ['fetch', 'http://127.0.0.1:9', 'E_REQUEST'],
            ['fetch', 'http://127.0.0.1:9', 'E_REQUEST'],
          ],
        )
      }
    }
    assert.equal(f.netOpsRemaining, 5, 'nothing was sent: no net_ops spent')
  })
})

// The lone-surrogate check of fetch's `headers` read the option a second
// time, apart from napi-rs' conversion that was sent: a getter answering
// { 'X-A': 'a\uD800' } first (converted with U+FFFD and sent) and
// { 'X-A': 'ok' } after (judged) passed the check. `headers` is read once,
// and that read is the one judged and sent.
describe('node2-23: fetch headers are read once', () => {
  test('node2-23_fetch_headers_getter_read_once', async () => {
    const f = new Fetcher(Policy.parse('[net]\nallow = ["127.0.0.1:9"]\nallow_http = true\n[budgets]\nnet_ops = 5\n', dir))
    const check = (e) => {
      assert.equal(e.code, 'E_REQUEST', e.message)
      assert.match(e.message, /headers/, e.message)
      assert.deepEqual(e.hops, [])
      return true
    }
    for (const async of [false, true]) {
      let outer = 0
      const o = {
        get headers() {
          return ++outer === 1 ? { 'X-A': 'a\uD800' } : { 'X-A': 'ok' }
        },
        timeoutMs: 2000,
      }
      let inner = 0
      const p = {
        headers: {
          get 'X-B'() {
            return ++inner === 1 ? 'b\uDC00' : 'ok'
          },
        },
        timeoutMs: 2000,
      }
      for (const opts of [o, p]) {
        if (async) await assert.rejects(f.fetchAsync('http://127.0.0.1:9/', opts), check)
        else assert.throws(() => f.fetch('http://127.0.0.1:9/', opts), check)
      }
      assert.equal(outer, 1, 'the headers getter ran once')
      assert.equal(inner, 1, 'the header value getter ran once')
    }
    assert.equal(f.netOpsRemaining, 5, 'nothing was sent')
  })
})
