'use strict'
// The binding's own tests: Root (beneath semantics, fds usable with fs),
// error codes and properties, the async twins, the audit callback, and the
// Executor (exit code, output, timeout 124, abort 130, dispose).

const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')

const { Root, Policy, Sandbox, Executor } = require('..')

function tempDir() {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-api-')))
}

/** Asserts that `fn` throws an Error with `code` (and the other props). */
function throwsCode(fn, code, props = {}) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, 'an Error')
    assert.equal(e.code, code, e.message)
    for (const [k, v] of Object.entries(props)) assert.equal(e[k], v, `.${k}`)
    return true
  })
}

async function rejectsCode(promise, code, props = {}) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Error, 'an Error')
    assert.equal(e.code, code, e.message)
    for (const [k, v] of Object.entries(props)) assert.equal(e[k], v, `.${k}`)
    return true
  })
}

/** ws/ (read+write root) with a.txt, sub/, links; outside/secret.txt. */
function fixture() {
  const dir = tempDir()
  fs.mkdirSync(path.join(dir, 'ws/sub'), { recursive: true })
  fs.mkdirSync(path.join(dir, 'outside'))
  fs.writeFileSync(path.join(dir, 'ws/a.txt'), 'alpha\nbeta\ngamma\n')
  fs.writeFileSync(path.join(dir, 'outside/secret.txt'), 'TOP SECRET\n')
  fs.symlinkSync('../outside/secret.txt', path.join(dir, 'ws/out'))
  fs.symlinkSync(path.join(dir, 'ws/a.txt'), path.join(dir, 'ws/abs'))
  fs.symlinkSync('a.txt', path.join(dir, 'ws/in'))
  return dir
}

describe('Root', () => {
  let dir
  let root
  before(() => {
    dir = fixture()
    root = Root.open(path.join(dir, 'ws'))
  })
  after(() => {
    root.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  test('name is the directory it was opened with', () => {
    assert.equal(root.name, path.join(dir, 'ws'))
  })

  test('escapes are refused with E_PATH_ESCAPE', () => {
    throwsCode(() => root.openFile('../outside/secret.txt'), 'E_PATH_ESCAPE')
    throwsCode(() => root.openFile('sub/../../outside/secret.txt'), 'E_PATH_ESCAPE')
    throwsCode(() => root.openFile('/etc/passwd'), 'E_PATH_ESCAPE')
    throwsCode(() => root.openFile('out'), 'E_PATH_ESCAPE', { path: 'out' })
    throwsCode(() => root.openFile('abs'), 'E_PATH_ESCAPE')
    throwsCode(() => root.stat('out'), 'E_PATH_ESCAPE')
    throwsCode(() => root.openFile('../x', 'wx'), 'E_PATH_ESCAPE')
    throwsCode(() => root.mkdir('../made'), 'E_PATH_ESCAPE')
    assert.equal(fs.existsSync(path.join(dir, 'made')), false)
    assert.equal(fs.existsSync(path.join(dir, 'x')), false)
  })

  test('.. inside the root and in-root symlinks resolve (beneath semantics)', () => {
    const fd = root.openFile('sub/../in')
    try {
      const buf = Buffer.alloc(64)
      const n = fs.readSync(fd, buf, 0, buf.length, 0)
      assert.equal(buf.subarray(0, n).toString(), 'alpha\nbeta\ngamma\n')
    } finally {
      fs.closeSync(fd)
    }
  })

  test('the fd is usable with fs and owned by the caller', () => {
    const fd = root.openFile('sub/new.txt', 'wx', 0o600)
    assert.equal(typeof fd, 'number')
    fs.writeSync(fd, 'written through fs\n')
    assert.equal(fs.fstatSync(fd).size, 19)
    fs.closeSync(fd)
    assert.equal(fs.readFileSync(path.join(dir, 'ws/sub/new.txt'), 'utf8'), 'written through fs\n')
    assert.equal(fs.statSync(path.join(dir, 'ws/sub/new.txt')).mode & 0o777, 0o600)
    throwsCode(() => root.openFile('sub/new.txt', 'wx'), 'E_EXISTS')
    const fd2 = root.openFile('sub/new.txt', 'a')
    fs.writeSync(fd2, 'more\n')
    fs.closeSync(fd2)
    assert.equal(fs.readFileSync(path.join(dir, 'ws/sub/new.txt'), 'utf8'), 'written through fs\nmore\n')
    throwsCode(() => root.openFile('a.txt', 'bogus'), 'E_REQUEST')
  })

  test('creation never follows a final symlink', () => {
    fs.symlinkSync('nowhere.txt', path.join(dir, 'ws/dangling'))
    throwsCode(() => root.openFile('dangling', 'wx'), 'E_EXISTS')
    assert.equal(fs.existsSync(path.join(dir, 'ws/nowhere.txt')), false)
  })

  test('mkdir, stat, lstat, readlink, rename, readdir, remove', () => {
    root.mkdir('d1')
    root.mkdir('d2/e/f', undefined, true)
    throwsCode(() => root.mkdir('d1'), 'E_EXISTS')
    assert.equal(root.stat('d2/e/f').kind, 'dir')
    assert.equal(root.stat('in').kind, 'file')
    assert.equal(root.stat('in').size, 17)
    assert.equal(root.lstat('in').kind, 'symlink')
    assert.equal(root.readlink('in'), 'a.txt')
    assert.equal(root.readlink('out'), '../outside/secret.txt')
    root.rename('d1', 'd3')
    assert.ok(root.readdir('.').includes('d3'))
    assert.ok(!root.readdir('.').includes('d1'))
    throwsCode(() => root.rename('d3', '../d3'), 'E_PATH_ESCAPE')
    root.remove('d3')
    throwsCode(() => root.stat('d3'), 'E_NOT_FOUND')
    throwsCode(() => root.remove('d2'), 'E_NOT_EMPTY')
    root.remove('out')
    assert.equal(fs.readFileSync(path.join(dir, 'outside/secret.txt'), 'utf8'), 'TOP SECRET\n')
  })

  test('a closed root answers E_CLOSED; open fds stay valid', () => {
    const r = Root.open(path.join(dir, 'ws'))
    const fd = r.openFile('a.txt')
    r.close()
    throwsCode(() => r.stat('a.txt'), 'E_CLOSED')
    assert.equal(fs.fstatSync(fd).size, 17)
    fs.closeSync(fd)
  })

  // The fast stat reads a path of up to about 1 KiB into a stack buffer.
  // Node-API writes only whole characters into it, so a path whose last
  // character did not fit came back up to 3 bytes short of the buffer and
  // was taken as whole: stat('<file>€') answered the metadata of <file>.
  test('bind20: stat and lstat of a path past the fast buffer by one character are of that path', () => {
    const ws = path.join(dir, 'ws')
    const prefix = Array(5).fill('m'.repeat(200)).join('/') + '/'
    fs.mkdirSync(path.join(ws, prefix), { recursive: true })
    try {
      for (const tail of ['\u00e9', '\u20ac', '\u{1F600}', '\u20acxyz', 'x\u20ac']) {
        for (let pad = 10; pad <= 22; pad++) {
          const file = prefix + 'f'.repeat(pad)
          fs.writeFileSync(path.join(ws, file), 'another file\n')
          const asked = file + tail
          throwsCode(() => root.stat(asked), 'E_NOT_FOUND')
          throwsCode(() => root.lstat(asked), 'E_NOT_FOUND')
          fs.writeFileSync(path.join(ws, asked), 'the asked file, longer\n')
          assert.equal(root.stat(asked).size, 23, `${Buffer.byteLength(asked)} bytes`)
          assert.equal(root.lstat(asked).size, 23)
          assert.equal(root.stat(file).size, 13)
          fs.rmSync(path.join(ws, asked))
          fs.rmSync(path.join(ws, file))
        }
      }
    } finally {
      fs.rmSync(path.join(ws, 'm'.repeat(200)), { recursive: true, force: true })
    }
  })

  test('opening a missing directory fails with its code', () => {
    throwsCode(() => Root.open(path.join(dir, 'missing')), 'E_NOT_FOUND')
  })

  // stat/lstat take a fast path (a Float64Array filled natively, the object
  // built in JavaScript): the object must be what fs reports, with the
  // RootStat properties in order, for every kind and path shape.
  test('stat and lstat objects match fs, property for property', () => {
    const keys = ['kind', 'size', 'mode', 'nlink', 'dev', 'ino', 'uid', 'gid', 'mtimeMs']
    const ws = path.join(dir, 'ws')
    fs.mkdirSync(path.join(ws, 'é ü'), { recursive: true })
    fs.writeFileSync(path.join(ws, 'é ü/ñ.txt'), 'unicode\n')
    const long = `${'l'.repeat(200)}/`.repeat(6) // > 1 KiB: the long-path branch
    fs.mkdirSync(path.join(ws, long), { recursive: true })
    fs.writeFileSync(path.join(ws, long, 'f.txt'), 'deep')
    const cases = [
      ['stat', 'a.txt', 'a.txt', 'file'],
      ['stat', 'in', 'a.txt', 'file'],
      ['lstat', 'in', 'in', 'symlink'],
      ['stat', 'sub', 'sub', 'dir'],
      ['stat', '.', '.', 'dir'],
      ['stat', 'é ü/ñ.txt', 'é ü/ñ.txt', 'file'],
      ['lstat', 'sub/../é ü', 'é ü', 'dir'],
      ['stat', `${long}f.txt`, `${long}f.txt`, 'file'],
    ]
    for (const [op, rel, host, kind] of cases) {
      const st = root[op](rel)
      const ref = (op === 'stat' ? fs.statSync : fs.lstatSync)(path.join(ws, host))
      assert.deepEqual(Object.keys(st), keys, `${op} ${rel}`)
      assert.deepEqual(st, {
        kind,
        size: ref.size,
        mode: ref.mode & 0o7777,
        nlink: ref.nlink,
        dev: ref.dev,
        ino: ref.ino,
        uid: ref.uid,
        gid: ref.gid,
        mtimeMs: st.mtimeMs,
      }, `${op} ${rel}`)
      assert.ok(Math.abs(st.mtimeMs - ref.mtimeMs) < 1, `${op} ${rel} mtimeMs`)
    }
    // Each call returns a fresh object (the shared buffer never leaks).
    const a = root.stat('a.txt')
    const b = root.stat('sub')
    assert.notEqual(a, b)
    assert.equal(a.kind, 'file')
    assert.equal(a.size, 17)
    throwsCode(() => root.lstat(`${long}missing`), 'E_NOT_FOUND')
    throwsCode(() => root.lstat('../x'), 'E_PATH_ESCAPE')
  })

  test('stat rejects a non-string path and a foreign receiver', () => {
    // E_REQUEST naming the argument (boundary.test.js), as every method.
    const notString = (e) => e.code === 'E_REQUEST' && /`path` must be a string/.test(e.message)
    assert.throws(() => root.stat(5), notString)
    assert.throws(() => root.lstat(), notString)
    assert.throws(() => Root.prototype.stat.call({}, 'a.txt'))
    assert.throws(() => Root.prototype.lstat.call(new Sandbox({}), 'a.txt'))
  })

  test('stat works in a worker thread (its own environment)', async () => {
    const { Worker } = require('node:worker_threads')
    const w = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads')
       const { Root } = require(workerData.mod)
       const r = Root.open(workerData.ws)
       parentPort.postMessage([r.stat('a.txt'), r.lstat('in').kind])
       r.close()`,
      { eval: true, workerData: { mod: path.join(__dirname, '..'), ws: path.join(dir, 'ws') } },
    )
    const [st, kind] = await new Promise((resolve, reject) => {
      w.once('message', resolve)
      w.once('error', reject)
    })
    await w.terminate()
    assert.equal(st.kind, 'file')
    assert.equal(st.size, 17)
    assert.equal(kind, 'symlink')
    assert.deepEqual(root.stat('a.txt'), { ...st, mtimeMs: root.stat('a.txt').mtimeMs })
  })
})

describe('Sandbox errors', () => {
  let dir
  let sb
  before(() => {
    dir = fixture()
    sb = new Sandbox({
      readRoots: [path.join(dir, 'ws')],
      writeRoot: path.join(dir, 'ws'),
      denyWrite: ['*.lock', '.github/**'],
      maxReadBytes: 1024,
      maxWriteBytes: 16,
    })
  })
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('codes and properties', () => {
    throwsCode(() => sb.read('../outside/secret.txt'), 'E_PATH_INVALID')
    throwsCode(() => sb.read('/etc/passwd'), 'E_PATH_INVALID')
    throwsCode(() => sb.read('out'), 'E_PATH_ESCAPE', { path: 'out' })
    throwsCode(() => sb.read('missing.txt'), 'E_NOT_FOUND', { path: 'missing.txt' })
    throwsCode(() => sb.write('a.txt', 'x'), 'E_EXISTS', { path: 'a.txt' })
    throwsCode(() => sb.write('x.lock', 'x'), 'E_FS_PROTECTED', { pattern: '*.lock' })
    throwsCode(() => sb.write('.github/workflows/ci.yml', 'x'), 'E_FS_PROTECTED', { pattern: '.github/**' })
    throwsCode(() => sb.write('.git/config', 'x'), 'E_FS_PROTECTED')
    throwsCode(() => sb.write('big.txt', 'x'.repeat(17)), 'E_TOO_LARGE')
    throwsCode(() => sb.edit('a.txt', 'nope', 'x'), 'E_DENIED') // edit needs allowOverwrite
    throwsCode(() => sb.write('in', 'x', { overwrite: true }), 'E_SYMLINK', { path: 'in' })
    throwsCode(() => sb.readLines('a.txt', 0), 'E_REQUEST')
    throwsCode(() => new Sandbox({ maxReadBytes: -1 }), 'E_REQUEST')
  })

  test('the message names the code and no host path', () => {
    try {
      sb.read('out')
      assert.fail('read succeeded')
    } catch (e) {
      assert.match(e.message, /^E_PATH_ESCAPE: /)
      assert.ok(!e.message.includes(dir), e.message)
    }
  })

  test('nothing is granted by default (E_DENIED)', () => {
    const empty = new Sandbox()
    throwsCode(() => empty.read('a.txt'), 'E_DENIED')
    throwsCode(() => empty.write('a.txt', 'x'), 'E_DENIED')
    const ro = new Sandbox({ readRoots: [path.join(dir, 'ws')] })
    assert.equal(ro.readText('a.txt'), 'alpha\nbeta\ngamma\n')
    throwsCode(() => ro.write('n.txt', 'x'), 'E_DENIED')
  })

  test('the fs_ops budget and close()', () => {
    const b = new Sandbox({ readRoots: [path.join(dir, 'ws')], fsOps: 1 })
    assert.equal(b.fsOpsRemaining, 1)
    b.stat('a.txt')
    throwsCode(() => b.stat('a.txt'), 'E_DENIED')
    const c = new Sandbox({ readRoots: [path.join(dir, 'ws')] })
    assert.equal(c.fsOpsRemaining, null)
    c.close()
    assert.equal(c.closed, true)
    throwsCode(() => c.read('a.txt'), 'E_CLOSED')
  })

  test('a refused policy throws E_POLICY with the key', () => {
    const p = path.join(dir, 'bad.toml')
    fs.writeFileSync(p, '[fs]\nmax_read_bytes = 0\n')
    throwsCode(() => Policy.load(p), 'E_POLICY', { key: 'fs.max_read_bytes' })
    fs.writeFileSync(p, '[fs]\nbogus = 1\n')
    throwsCode(() => Policy.load(p), 'E_POLICY', { key: 'fs.bogus' })
  })
})

describe('Sandbox operations, sync and async', () => {
  let dir
  let sb
  const events = []
  before(() => {
    dir = fixture()
    sb = new Sandbox({
      readRoots: [path.join(dir, 'ws')],
      writeRoot: path.join(dir, 'ws'),
      allowOverwrite: true,
      audit: (e) => events.push(e),
    })
  })
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('sync methods', () => {
    assert.deepEqual(sb.read('a.txt'), Buffer.from('alpha\nbeta\ngamma\n'))
    const r = sb.readLines('a.txt', 2, 1)
    assert.equal(r.content.toString(), 'beta\n')
    assert.equal(r.totalLines, 3)
    assert.equal(r.lines, 1)
    assert.equal(sb.write('n/b.bin', Buffer.from([0, 1, 2, 255])), 4)
    assert.deepEqual(fs.readFileSync(path.join(dir, 'ws/n/b.bin')), Buffer.from([0, 1, 2, 255]))
    assert.equal(sb.write('n/b.bin', 'text', { overwrite: true }), 4)
    assert.equal(sb.edit('n/b.bin', 't', 'T', { all: true }), 2)
    assert.equal(sb.readText('n/b.bin'), 'TexT')
    assert.deepEqual(
      sb.list('n').map((e) => [e.name, e.kind, e.size]),
      [['b.bin', 'file', 4]],
    )
    assert.deepEqual(sb.stat('n'), { kind: 'dir', size: sb.stat('n').size, mode: sb.stat('n').mode })
    sb.mkdir('m/k')
    sb.rename('n/b.bin', 'm/k/c.txt')
    assert.deepEqual(sb.glob('**/*.txt'), ['a.txt', 'm/k/c.txt'])
    assert.deepEqual(sb.grep('^Tex', undefined, 5), [{ path: 'm/k/c.txt', line: 1, text: 'TexT' }])
    throwsCode(() => sb.edit('a.txt', 'nope', 'x'), 'E_EDIT_NO_MATCH', { path: 'a.txt' })
    sb.delete('m/k/c.txt')
    throwsCode(() => sb.stat('m/k/c.txt'), 'E_NOT_FOUND')
  })

  test('async methods resolve with the same values', async () => {
    assert.deepEqual(await sb.readAsync('a.txt'), Buffer.from('alpha\nbeta\ngamma\n'))
    assert.equal(await sb.readTextAsync('a.txt'), 'alpha\nbeta\ngamma\n')
    assert.equal((await sb.readLinesAsync('a.txt', 3)).content.toString(), 'gamma\n')
    assert.equal(await sb.writeAsync('p/q.txt', 'hello'), 5)
    assert.equal(await sb.editAsync('p/q.txt', 'hello', 'bye', { all: false }), 1)
    assert.deepEqual((await sb.listAsync('p')).map((e) => e.name), ['q.txt'])
    assert.equal((await sb.statAsync('p/q.txt')).size, 3)
    await sb.mkdirAsync('r')
    await sb.renameAsync('p/q.txt', 'r/q.txt')
    assert.deepEqual(await sb.globAsync('*.txt', 'r'), ['r/q.txt'])
    assert.equal((await sb.grepAsync('bye')).length, 1)
    await sb.deleteAsync('r/q.txt')
    const many = await Promise.all(Array.from({ length: 16 }, () => sb.readTextAsync('a.txt')))
    assert.equal(many.length, 16)
  })

  test('async methods reject with coded errors', async () => {
    await rejectsCode(sb.readAsync('out'), 'E_PATH_ESCAPE', { path: 'out' })
    await rejectsCode(sb.readAsync('../x'), 'E_PATH_INVALID')
    await rejectsCode(sb.writeAsync('a.txt', 'x'), 'E_EXISTS')
    await rejectsCode(sb.editAsync('a.txt', 'a', 'b'), 'E_EDIT_AMBIGUOUS')
    await rejectsCode(sb.deleteAsync('.'), 'E_PATH_INVALID')
    await rejectsCode(sb.grepAsync('(unclosed'), 'E_REQUEST')
  })

  test('grep options: glob, case, context, modes, head limit, gitignore', async () => {
    sb.write('g/src/m.rs', 'one\nFn alpha\nthree\nfn beta\n')
    sb.write('g/src/skip.rs', 'fn gamma\n')
    sb.write('g/notes.md', 'fn in a note\n')
    sb.write('.gitignore', 'g/src/skip.rs\n')
    try {
      // The old call forms answer as before.
      assert.deepEqual(sb.grep('alpha', 'g'), [{ path: 'g/src/m.rs', line: 2, text: 'Fn alpha' }])
      const hits = sb.grep('fn', 'g', undefined, { glob: '*.rs', caseInsensitive: true, before: 1, after: 1 })
      assert.deepEqual(
        hits.map((m) => [m.path, m.line]),
        [['g/src/m.rs', 2], ['g/src/m.rs', 4], ['g/src/skip.rs', 1]],
      )
      assert.deepEqual([hits[0].before, hits[0].after, hits[1].after], [['one'], ['three'], []])
      assert.deepEqual(sb.grep('fn', 'g', undefined, { mode: 'files' }), ['g/notes.md', 'g/src/m.rs', 'g/src/skip.rs'])
      assert.deepEqual(sb.grep('fn', 'g', 1, { mode: 'files' }), ['g/notes.md'])
      assert.deepEqual(
        await sb.grepAsync('fn', 'g', undefined, { mode: 'files', glob: '*.rs', gitignore: true }),
        ['g/src/m.rs'],
      )
      assert.deepEqual(await sb.grepAsync('FN', 'g', undefined, { mode: 'count', caseInsensitive: true, glob: '*.rs' }), [
        { path: 'g/src/m.rs', count: 2 },
        { path: 'g/src/skip.rs', count: 1 },
      ])
      throwsCode(() => sb.grep('fn', 'g', undefined, { mode: 'everything' }), 'E_REQUEST')
      await rejectsCode(sb.grepAsync('fn', 'g', undefined, { mode: 'files', before: 2 }), 'E_REQUEST')
    } finally {
      for (const f of ['g/src/m.rs', 'g/src/skip.rs', 'g/notes.md', '.gitignore']) sb.delete(f)
      for (const d of ['g/src', 'g']) sb.delete(d)
    }
  })

  test('grep7: a grep says which lines it cut and what it could not read', async () => {
    const g = path.join(dir, 'ws/g7')
    fs.mkdirSync(g, { recursive: true })
    const long = 'y'.repeat(1500)
    fs.writeFileSync(path.join(g, 'a.txt'), `${long}\nhit${long}\n${long}\nshort\n`)
    try {
      const found = sb.grepFound('hit', 'g7', undefined, { before: 1, after: 2 })
      const m = found.matches[0]
      assert.deepEqual(
        [m.text.length, m.lineTruncated, m.beforeTruncated, m.afterTruncated, found.unreadable],
        [1000, true, [0], [0], 0],
      )
      const whole = sb.grep('short', 'g7')[0]
      assert.equal(whole.lineTruncated ?? false, false)
      const locked = path.join(g, 'locked.txt')
      fs.writeFileSync(locked, 'hit\n')
      fs.chmodSync(locked, 0)
      let readable = true
      try {
        fs.readFileSync(locked)
      } catch {
        readable = false
      }
      // A uid that reads a mode-000 file has nothing to show here.
      if (!readable) assert.equal(sb.grepFound('hit', 'g7', undefined, { mode: 'files' }).unreadable, 1)
    } finally {
      fs.rmSync(g, { recursive: true, force: true })
    }
  })

  test('grep8: a grep counts the binary files it passed over', async () => {
    // A binary file (a NUL in its first 8 KiB) holding the pattern after
    // the NUL was skipped in silence.
    const g = path.join(dir, 'ws/g8')
    fs.mkdirSync(path.join(g, 't'), { recursive: true })
    fs.writeFileSync(path.join(g, 'blob.bin'), Buffer.from('head\0hit after the NUL\n'))
    fs.writeFileSync(path.join(g, 't/a.txt'), 'hit\n')
    try {
      const found = sb.grepFound('hit', 'g8')
      assert.deepEqual(
        [found.matches.map((m) => m.path), found.binary, found.unreadable],
        [['g8/t/a.txt'], 1, 0],
      )
      assert.equal(sb.grepFound('hit', 'g8', undefined, { mode: 'count' }).binary, 1)
      assert.equal((await sb.grepFoundAsync('hit', 'g8', undefined, { mode: 'files' })).binary, 1)
      assert.equal(sb.grepFound('hit', 'g8/t').binary, 0)
    } finally {
      fs.rmSync(g, { recursive: true, force: true })
    }
  })

  test('a glob or grep cut at a cap says so', async () => {
    const cutDir = path.join(dir, 'ws/cut')
    fs.mkdirSync(path.join(cutDir, 'many'), { recursive: true })
    fs.writeFileSync(path.join(cutDir, 'c.txt'), 'hit\nhit\n')
    for (let i = 0; i < 1001; i++) fs.writeFileSync(path.join(cutDir, 'many', `f${String(i).padStart(4, '0')}`), '')
    try {
      const cut = sb.grepFound('hit', 'cut', 1)
      assert.deepEqual([cut.matches.length, cut.truncated, cut.limit], [1, true, 'max_results'])
      const whole = await sb.grepFoundAsync('hit', 'cut', 2, { mode: 'count' })
      assert.deepEqual(whole.counts, [{ path: 'cut/c.txt', count: 2 }])
      assert.deepEqual([whole.truncated, whole.limit ?? null], [false, null])
      const paths = sb.globFound('*', 'cut/many')
      assert.deepEqual([paths.paths.length, paths.truncated, paths.limit], [1000, true, 'max_results'])
      const one = await sb.globFoundAsync('*.txt', 'cut')
      assert.deepEqual([one.paths, one.truncated, one.limit ?? null], [['cut/c.txt'], false, null])
    } finally {
      fs.rmSync(cutDir, { recursive: true, force: true })
    }
  })

  test('the audit callback receives events for sync and async calls', async () => {
    await sleep(100) // let the events of earlier tests arrive first
    events.length = 0
    sb.read('a.txt')
    throwsCode(() => sb.read('out'), 'E_PATH_ESCAPE')
    await sb.statAsync('a.txt')
    await rejectsCode(sb.readAsync('missing'), 'E_NOT_FOUND')
    // Events arrive on a later turn of the event loop.
    for (let i = 0; i < 50 && events.length < 4; i++) await sleep(10)
    assert.deepEqual(
      events.map((e) => [e.op, e.path, e.outcome]),
      [
        ['read', 'a.txt', 'OK'],
        ['read', 'out', 'E_PATH_ESCAPE'],
        ['stat', 'a.txt', 'OK'],
        ['read', 'missing', 'E_NOT_FOUND'],
      ],
    )
    assert.equal(events[0].size, 17)
    assert.equal(typeof events[0].time, 'number')
    assert.ok(Math.abs(events[0].time - Date.now()) < 60_000)
    assert.ok(!JSON.stringify(events).includes('alpha'), 'never content')
  })

  test('Sandbox.fromPolicy with an audit callback', async () => {
    fs.writeFileSync(path.join(dir, 'policy.toml'), '[fs]\nread_roots = ["ws"]\n')
    const policy = Policy.load(path.join(dir, 'policy.toml'))
    assert.match(policy.digest, /^sha256:[0-9a-f]{64}$/)
    assert.deepEqual(policy.summary.read_roots, [path.join(dir, 'ws')])
    assert.equal(policy.summary.write_root, null)
    assert.match(policy.toString(), /ws/)
    const seen = []
    const psb = Sandbox.fromPolicy(policy, { audit: (e) => seen.push(e) })
    assert.equal(psb.readText('a.txt').length, 17)
    throwsCode(() => psb.write('z.txt', 'x'), 'E_DENIED')
    for (let i = 0; i < 50 && seen.length < 2; i++) await sleep(10)
    assert.deepEqual(seen.map((e) => e.outcome), ['OK', 'E_DENIED'])
  })
})

describe('Executor and protected paths', () => {
  test('protectedChanges lists what the command changed; it is undone', async () => {
    const dir = fixture()
    const ws = path.join(dir, 'ws')
    fs.writeFileSync(path.join(ws, 'Cargo.lock'), 'v1\n')
    fs.writeFileSync(
      path.join(dir, 'policy.toml'),
      '[fs]\nread_roots = ["ws"]\nwrite_root = "ws"\ndeny_write = ["*.lock"]\n[exec]\nenabled = true\nshell = "/bin/sh"\ntimeout_ms = 10000\n',
    )
    const ex = new Executor(Policy.load(path.join(dir, 'policy.toml')))
    try {
      const r = await ex.exec('echo evil > Cargo.lock; touch new.lock')
      const quarantined = { path: 'new.lock', pattern: '*.lock', action: 'quarantined' }
      if (r.confined.protected_binds?.bound) {
        // In namespaces Cargo.lock is bound read-only: the write fails in
        // the command, and only the new file is undone afterwards.
        assert.match(r.stderr, /Read-only file system/)
        assert.deepEqual(r.protectedChanges, [quarantined])
      } else {
        assert.deepEqual(r.protectedChanges, [
          { path: 'Cargo.lock', pattern: '*.lock', action: 'restored' },
          quarantined,
        ])
      }
      assert.equal(fs.readFileSync(path.join(ws, 'Cargo.lock'), 'utf8'), 'v1\n')
      assert.equal(fs.existsSync(path.join(ws, 'new.lock')), false)
      assert.deepEqual((await ex.exec('true')).protectedChanges, [])
    } finally {
      await ex.dispose()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('Executor', () => {
  let dir
  let policy
  let ex
  before(() => {
    dir = fixture()
    fs.writeFileSync(
      path.join(dir, 'policy.toml'),
      '[fs]\nread_roots = ["ws"]\nwrite_root = "ws"\n[exec]\nenabled = true\nshell = "/bin/sh"\ntimeout_ms = 10000\n',
    )
    policy = Policy.load(path.join(dir, 'policy.toml'))
    ex = new Executor(policy)
  })
  after(async () => {
    await ex.dispose()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  test('start, exit code, stdout, stderr, cwd', async () => {
    assert.equal(ex.enabled, true)
    await ex.start()
    const r = await ex.exec('cat a.txt; echo oops >&2; exit 3')
    assert.equal(r.exitCode, 3)
    assert.equal(r.stdout, 'alpha\nbeta\ngamma\n')
    assert.equal(r.stderr, 'oops\n')
    assert.equal(r.timedOut, false)
    assert.equal(r.aborted, false)
    assert.equal(typeof r.confined, 'object')
    const pwd = await ex.exec('pwd', { cwd: 'sub' })
    assert.equal(pwd.exitCode, 0)
    assert.equal(pwd.stdout.trim(), path.join(dir, 'ws/sub'))
    const missing = await ex.exec('no-such-command-sandgate')
    assert.equal(missing.exitCode, 127)
  })

  test('concurrent execs', async () => {
    const rs = await Promise.all([1, 2, 3].map((n) => ex.exec(`echo ${n}`)))
    assert.deepEqual(rs.map((r) => r.stdout), ['1\n', '2\n', '3\n'])
  })

  // Each exec has a thread of its own: twenty 2 s commands run at once.
  // On the libuv pool (4 threads unless UV_THREADPOOL_SIZE says more) they
  // ran four at a time, 10 s in all.
  test('nodeworker26: twenty concurrent execs run at once, each with its own output', async () => {
    const n = Array.from({ length: 20 }, (_, i) => i)
    const t0 = Date.now()
    const rs = await Promise.all(n.map((i) => ex.exec(`sleep 2; echo ${i}`)))
    const took = Date.now() - t0
    assert.deepEqual(rs.map((r) => r.stdout), n.map((i) => `${i}\n`))
    assert.ok(rs.every((r) => r.exitCode === 0))
    assert.ok(took < 8000, `twenty 2 s commands took ${took} ms`)
  })

  test('timeout is exit code 124', async () => {
    const t0 = Date.now()
    const r = await ex.exec('sleep 10', { timeoutMs: 200 })
    assert.equal(r.exitCode, 124)
    assert.equal(r.timedOut, true)
    assert.ok(Date.now() - t0 < 5000)
  })

  test('AbortController aborts with exit code 130', async () => {
    const ac = new AbortController()
    const t0 = Date.now()
    const p = ex.exec('sleep 10', { abortSignal: ac.signal })
    setTimeout(() => ac.abort(), 200)
    const r = await p
    assert.equal(r.exitCode, 130)
    assert.equal(r.aborted, true)
    assert.ok(Date.now() - t0 < 5000)
  })

  test('an already aborted signal ends the command at once', async () => {
    const r = await ex.exec('sleep 10', { abortSignal: AbortSignal.abort() })
    assert.equal(r.exitCode, 130)
  })

  test('a signal that never fires changes nothing', async () => {
    const ac = new AbortController()
    const r = await ex.exec('echo fine', { abortSignal: ac.signal })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'fine\n')
    ac.abort()
  })

  test('signals of finished execs hold no descriptors', async () => {
    const fds = () => fs.readdirSync('/proc/self/fd').length
    const controllers = []
    const before = fds()
    for (let i = 0; i < 30; i++) {
      const ac = new AbortController()
      controllers.push(ac) // kept alive: the listeners must not pin an fd each
      assert.equal((await ex.exec('true', { abortSignal: ac.signal })).exitCode, 0)
    }
    assert.ok(fds() - before < 10, `${fds() - before} more descriptors`)
    for (const ac of controllers) ac.abort()
  })

  test('refusals before anything runs reject', async () => {
    await rejectsCode(ex.exec('touch ran', { cwd: '..' }), 'E_PATH_INVALID')
    await rejectsCode(ex.exec('true', { timeoutMs: 0 }), 'E_REQUEST')
    assert.throws(() => ex.exec('true', { abortSignal: {} }), (e) => e.code === 'E_REQUEST')
    assert.equal(fs.existsSync(path.join(dir, 'ran')), false)
  })

  test('the audit option reports each exec: exit code, limit, refusals, never the command', async () => {
    const secret = 'marker-7f3a-not-in-audit'
    const events = []
    const own = new Executor(policy, { audit: (e) => events.push(e) })
    try {
      assert.equal((await own.exec(`echo ${secret}; exit 3`)).exitCode, 3)
      assert.equal((await own.exec(`sleep 10 # ${secret}`, { timeoutMs: 200 })).timedOut, true)
      await rejectsCode(own.exec(`echo ${secret}`, { cwd: '..' }), 'E_PATH_INVALID')
      // Events arrive on a later turn of the event loop.
      for (let i = 0; i < 100 && events.length < 3; i++) await sleep(10)
      assert.deepEqual(
        events.map((e) => [e.op, e.path, e.outcome, e.exitCode, e.limit]),
        [
          ['exec', '', 'OK', 3, undefined],
          ['exec', '', 'OK', 124, 'timeout'],
          ['exec', '..', 'E_PATH_INVALID', undefined, undefined],
        ],
      )
      assert.equal(events[0].size, secret.length + 1)
      assert.ok(!JSON.stringify(events).includes(secret), 'never the command or its output')
    } finally {
      await own.dispose()
    }
    const seen = []
    const opt = Executor.fromOptions({ write_root: path.join(dir, 'ws'), enabled: true }, undefined, {
      audit: (e) => seen.push(e),
    })
    try {
      assert.equal((await opt.exec('exit 5')).exitCode, 5)
      for (let i = 0; i < 100 && seen.length < 1; i++) await sleep(10)
      assert.deepEqual(seen.map((e) => [e.op, e.exitCode]), [['exec', 5]])
    } finally {
      await opt.dispose()
    }
  })

  test('leads22: an exec refused at the binding (a lone surrogate) reaches the audit callback', async () => {
    // C reports a command or cwd it cannot take as text through the
    // executor's audit; Node refused such a call without a record.
    const events = []
    const own = new Executor(policy, { audit: (e) => events.push(e) })
    try {
      await rejectsCode(own.exec('echo a\uD800'), 'E_REQUEST')
      await rejectsCode(own.exec('pwd', { cwd: 'w\uDC00' }), 'E_REQUEST')
      assert.equal((await own.exec('exit 4')).exitCode, 4)
      for (let i = 0; i < 100 && events.length < 3; i++) await sleep(10)
      assert.deepEqual(
        events.map((e) => [e.op, e.path, e.outcome, e.exitCode, e.size]),
        [
          ['exec', '', 'E_REQUEST', undefined, undefined],
          ['exec', 'w\uFFFD', 'E_REQUEST', undefined, undefined],
          ['exec', '', 'OK', 4, 0],
        ],
      )
    } finally {
      await own.dispose()
    }
  })

  test('exec disabled: E_DENIED', async () => {
    fs.writeFileSync(path.join(dir, 'off.toml'), '[fs]\nread_roots = ["ws"]\n')
    const off = new Executor(Policy.load(path.join(dir, 'off.toml')))
    assert.equal(off.enabled, false)
    await rejectsCode(off.exec('true'), 'E_DENIED')
    await off.dispose()
  })

  test('dispose kills what is still running', async () => {
    const own = new Executor(policy)
    await own.start()
    const p = own.exec('sleep 10')
    await sleep(200)
    const t0 = Date.now()
    await own.dispose()
    const r = await p
    assert.notEqual(r.exitCode, 0)
    assert.ok(Date.now() - t0 < 5000)
  })
})

describe('options instead of a policy file', () => {
  test('Policy.parse checks text against a base directory', () => {
    const dir = tempDir()
    fs.mkdirSync(path.join(dir, 'ws'))
    const p = Policy.parse('[fs]\nread_roots = ["ws"]\n', dir)
    assert.deepEqual(p.summary.read_roots, [path.join(dir, 'ws')])
    throwsCode(() => Policy.parse('[fs]\nwrite_root = 3\n', dir), 'E_POLICY', { key: 'fs.write_root' })
  })

  test('Policy.fromOptions takes every key of the file and its gate', () => {
    const dir = tempDir()
    fs.mkdirSync(path.join(dir, 'ws'))
    const every = {
      security_mode: 'restricted', read_roots: ['ws'], write_root: 'ws', deny_write: ['*.lock'],
      max_read_bytes: 100, max_write_bytes: 100, allow_overwrite: true, enabled: true,
      shell: '/bin/sh', timeout_ms: 4321, max_output_bytes: 1000, env_inherit: ['LANG'],
      confine: 'best_effort', process_allow: ['git:status'], allow: ['example.com'],
      allow_http: true, exec_ops: 3, fs_ops: 10, net_ops: 2,
    }
    const p = Policy.fromOptions(every, dir)
    assert.equal(p.summary.write_root, path.join(dir, 'ws'))
    assert.equal(p.summary.exec.timeout_ms, 4321)
    throwsCode(() => Policy.fromOptions({ timeout_ms: 0 }, dir), 'E_POLICY', { key: 'exec.timeout_ms' })
    assert.throws(() => Policy.fromOptions({ write_roots: 'ws' }, dir), /write_roots/)
  })

  test('Executor.fromOptions runs in an absolute cwd inside the root', async () => {
    const dir = tempDir()
    fs.mkdirSync(path.join(dir, 'ws', 'sub'), { recursive: true })
    fs.mkdirSync(path.join(dir, 'ws-secrets'))
    const ex = Executor.fromOptions({ write_root: path.join(dir, 'ws'), enabled: true, timeout_ms: 300 })
    try {
      const r = await ex.exec('pwd', { cwd: path.join(dir, 'ws', 'sub') })
      assert.equal(r.exitCode, 0)
      assert.equal(r.stdout.trim(), path.join(dir, 'ws', 'sub'))
      await rejectsCode(ex.exec('true', { cwd: path.join(dir, 'ws-secrets') }), 'E_PATH_ESCAPE')
      const slow = await ex.exec('sleep 5', { timeoutMs: 60000 })
      assert.equal(slow.exitCode, 124)
      assert.ok(slow.confined.notes.some((n) => n.includes('exec.timeout_ms (300 ms)')), slow.confined.notes)
    } finally {
      await ex.dispose()
    }
  })
})

describe('host paths', () => {
  test('hostName maps a host path by components: a prefix sibling and a climb are not inside', () => {
    const dir = tempDir()
    fs.mkdirSync(path.join(dir, 'app', 'src'), { recursive: true })
    fs.mkdirSync(path.join(dir, 'app-secrets'))
    fs.writeFileSync(path.join(dir, 'app-secrets', 'key'), 'secret')
    fs.mkdirSync(path.join(dir, 'docs'))
    const sb = new Sandbox({ readRoots: [path.join(dir, 'app'), path.join(dir, 'docs')], writeRoot: path.join(dir, 'app') })
    assert.equal(sb.hostName(path.join(dir, 'app', 'src', 'a.js')), 'src/a.js')
    assert.equal(sb.hostName(path.join(dir, 'app')), '.')
    assert.equal(sb.hostName(`${path.join(dir, 'app', 'src')}/`), 'src/')
    assert.equal(sb.hostName('src/a.js'), 'src/a.js')
    throwsCode(() => sb.hostName(path.join(dir, 'app-secrets', 'key')), 'E_PATH_ESCAPE')
    throwsCode(() => sb.hostName('/etc/passwd'), 'E_PATH_ESCAPE')
    // The climb maps to a name the sandbox then refuses.
    const climbed = sb.hostName(`${path.join(dir, 'app')}/../app-secrets/key`)
    assert.equal(climbed, '../app-secrets/key')
    throwsCode(() => sb.read(climbed), 'E_PATH_INVALID')
    // Write-side: the write root only.
    assert.equal(sb.hostName(path.join(dir, 'app', 'new.txt'), { write: true }), 'new.txt')
    throwsCode(() => sb.hostName(path.join(dir, 'docs', 'x'), { write: true }), 'E_DENIED')
    assert.equal(sb.hostName(path.join(dir, 'docs', 'x')), 'x')
  })

  test('hostName takes a symlinked root spelled through the link and resolved', () => {
    const dir = tempDir()
    fs.mkdirSync(path.join(dir, 'real'))
    fs.writeFileSync(path.join(dir, 'real', 'a.txt'), 'a')
    fs.symlinkSync(path.join(dir, 'real'), path.join(dir, 'link'))
    const sb = new Sandbox({ readRoots: [path.join(dir, 'link')], writeRoot: path.join(dir, 'link') })
    for (const spelling of ['link', 'real']) {
      const name = sb.hostName(path.join(dir, spelling, 'a.txt'))
      assert.equal(name, 'a.txt')
      assert.equal(sb.readText(name), 'a')
      assert.equal(sb.hostName(path.join(dir, spelling, 'b.txt'), { write: true }), 'b.txt')
    }
    throwsCode(() => sb.hostName(path.join(dir, 'link-other', 'a.txt')), 'E_PATH_ESCAPE')
  })
})

// Node joins the libuv pool's threads before it exits, and runs no native
// cleanup hook first: a command running on the pool held `process.exit()`
// until it ended, for as long as the policy's `timeout_ms` let it (here a
// command of 100,000 s, under a policy of 24 h). The package disposes every executor with a
// command in flight on 'exit', so the process exits, and its command with it.
test('ffi17: process.exit() with a command running is not held by it', () => {
  const { spawnSync } = require('node:child_process')
  const dir = tempDir()
  try {
    const script = `
      const { Executor } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const x = Executor.fromOptions({ write_root: ${JSON.stringify(dir)}, enabled: true, timeout_ms: 86400000 })
      x.exec('echo started > started; exec sleep 100000').then((r) => console.log('settled', r.exitCode))
      const wait = () => (require('node:fs').existsSync(${JSON.stringify(path.join(dir, 'started'))}) ? process.exit(7) : setTimeout(wait, 20))
      wait()
    `
    // 60 s: the bound of a hang, not of speed (the command would run 100,000 s).
    const r = spawnSync(process.execPath, ['-e', script], { timeout: 60000, encoding: 'utf8' })
    assert.equal(r.signal, null, `the child was still running after 60 s (stderr: ${r.stderr})`)
    assert.equal(r.status, 7, r.stderr)
    assert.ok(!r.stdout.includes('settled'), r.stdout)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('an exec whose abort signal cannot be made, out of descriptors, rejects E_IO naming the shortage', () => {
  // Its native signal takes a descriptor (an eventfd): out of them, the
  // call panicked. Run in a child under a low limit: the descriptor table
  // is the process's.
  const { spawnSync } = require('node:child_process')
  const dir = tempDir()
  try {
    const script = `
      const fs = require('node:fs')
      const { Executor } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const x = Executor.fromOptions({ write_root: ${JSON.stringify(dir)}, enabled: true })
      ;(async () => {
      await x.start()
      const held = []
      const fill = () => { for (;;) { try { held.push(fs.openSync('/dev/null', 'r')) } catch { break } } }
      // Node's own threads may close a descriptor between the fill and
      // the call: filled again and tried again, a few times.
      let outcome = 'no throw'
      for (let i = 0; i < 20 && outcome === 'no throw'; i++) {
        fill()
        try {
          x.exec('true', { abortSignal: new AbortController().signal }).then(() => {}, () => {})
        } catch (e) {
          outcome = e.code + ' ' + e.message
        }
      }
      for (const fd of held) fs.closeSync(fd)
      await x.dispose()
      console.log(outcome)
      })()
    `
    const r = spawnSync('sh', ['-c', 'ulimit -n 256 && exec "$0" -e "$1"', process.execPath, script], { timeout: 60000, encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    assert.match(r.stdout, /^E_IO .*abort signal.*Too many open files/, r.stdout + r.stderr)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

// The same with the command running in a worker thread. Exiting, Node
// stops each worker and waits for the worker's pool work, its command
// included, before the process exits, and runs no handler of the worker
// first: the exit was held for as long as the command's timeout let it.
// The package's 'exit' handler on the main thread disposes the executors
// of every thread with a command in flight.
test('nodebind26: process.exit() with a command running in a worker thread is not held by it', () => {
  const { spawnSync } = require('node:child_process')
  const dir = tempDir()
  try {
    const mod = JSON.stringify(path.join(__dirname, '..'))
    const script = `
      require(${mod})
      const { Worker } = require('node:worker_threads')
      const w = new Worker(
        "const { parentPort, workerData } = require('node:worker_threads');" +
        "const { Executor } = require(workerData.mod);" +
        "const x = Executor.fromOptions({ write_root: workerData.dir, enabled: true, timeout_ms: 86400000 });" +
        "x.exec('echo started > started; exec sleep 100000').then((r) => parentPort.postMessage('settled ' + r.exitCode))",
        { eval: true, workerData: { mod: ${mod}, dir: ${JSON.stringify(dir)} } },
      )
      w.on('message', (m) => console.log(m))
      const wait = () => (require('node:fs').existsSync(${JSON.stringify(path.join(dir, 'started'))}) ? process.exit(7) : setTimeout(wait, 20))
      wait()
    `
    // 60 s: the bound of a hang, not of speed (the command would run 100,000 s).
    const t0 = Date.now()
    const r = spawnSync(process.execPath, ['-e', script], { timeout: 60000, encoding: 'utf8' })
    assert.equal(r.signal, null, `the child was still running after 60 s (stderr: ${r.stderr})`)
    assert.equal(r.status, 7, r.stderr)
    assert.ok(Date.now() - t0 < 30000, `the exit took ${Date.now() - t0} ms`)
    assert.ok(!r.stdout.includes('settled'), r.stdout)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

// The processes whose command line holds `marker`, read from /proc (a
// process that ends between the listing and the read is not one).
function processesWith(marker) {
  const found = []
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    let cmdline
    try {
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ')
    } catch {
      continue
    }
    if (cmdline.includes(marker)) found.push(`${pid}: ${cmdline}`)
  }
  return found
}

async function untilNone(marker, ms) {
  const end = Date.now() + ms
  let left = processesWith(marker)
  while (left.length > 0 && Date.now() < end) {
    await sleep(50)
    left = processesWith(marker)
  }
  return left
}

// A worker ended by `worker.terminate()` with a command running. Run on
// the libuv pool, the command held the worker's teardown (Node waits for a
// worker's pool work before freeing its environment, and runs none of its
// JavaScript first): `terminate()` resolved only when the command ended,
// up to its timeout. Now the command runs on a thread of the addon's own,
// and the environment's teardown ends it with everything it started. Run
// in a child, which then lives on past the moment the command's thread
// finishes: its result, settled after the environment is gone, is dropped
// rather than delivered into the freed environment.
test('nodeworker26: worker.terminate() with a command running is not held by it, and ends the command', () => {
  const dir = tempDir()
  // Fractional seconds: a sleep of about 30 s whose command line is this
  // test's own.
  const marker = `sleep 30.${process.pid}${Date.now() % 100000}`
  try {
    const script = `
      const fs = require('node:fs')
      ${processesWith.toString()}
      const { Worker } = require('node:worker_threads')
      const w = new Worker(
        "const { parentPort, workerData } = require('node:worker_threads');" +
        "const { Executor } = require(workerData.mod);" +
        "const x = Executor.fromOptions({ write_root: workerData.dir, enabled: true, timeout_ms: 86400000 });" +
        // One with an abort listener to let go of, one without.
        "const ac = new AbortController();" +
        "const report = (p) => p.then((r) => parentPort.postMessage('settled ' + r.exitCode), (e) => parentPort.postMessage('rejected ' + e.code));" +
        "report(x.exec('echo > started1; ' + workerData.command, { abortSignal: ac.signal }));" +
        "report(x.exec('echo > started2; ' + workerData.command))",
        {
          eval: true,
          workerData: {
            mod: ${JSON.stringify(path.join(__dirname, '..'))},
            dir: ${JSON.stringify(dir)},
            command: ${JSON.stringify(`${marker} & exec ${marker}`)},
          },
        },
      )
      w.on('message', (m) => console.log(m))
      const started = [1, 2].map((n) => ${JSON.stringify(dir)} + '/started' + n)
      const wait = async () => {
        while (!started.every((f) => fs.existsSync(f))) await new Promise((r) => setTimeout(r, 20))
        // The sleeps are up: each shell has reached its exec.
        await new Promise((r) => setTimeout(r, 300))
        console.log('running ' + processesWith(${JSON.stringify(marker)}).length)
        const t0 = Date.now()
        await w.terminate()
        console.log('terminated ' + (Date.now() - t0))
        // Past the command thread's end: a settle into the freed
        // environment would crash here.
        await new Promise((r) => setTimeout(r, 1500))
        console.log('alive')
      }
      wait()
    `
    const t0 = Date.now()
    const child = require('node:child_process').spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d))
    child.stderr.setEncoding('utf8').on('data', (d) => (err += d))
    return new Promise((resolve, reject) => {
      // 60 s: the bound of a hang, not of speed.
      const bound = setTimeout(() => child.kill('SIGKILL'), 60000)
      child.on('exit', async (code, signal) => {
        clearTimeout(bound)
        try {
          assert.equal(signal, null, `the child was still running after 60 s (stdout: ${out}, stderr: ${err})`)
          assert.equal(code, 0, err)
          // Each shell's exec'd sleep and its background one (the child's
          // own command line holds the marker too).
          assert.ok(Number(/running (\d+)/.exec(out)?.[1]) >= 5, `the commands and their children were running: ${out}`)
          const took = Number(/terminated (\d+)/.exec(out)?.[1])
          assert.ok(took < 5000, `terminate() took ${took} ms (${out})`)
          assert.ok(out.includes('alive'), out)
          assert.ok(!out.includes('settled') && !out.includes('rejected'), out)
          assert.deepEqual(await untilNone(marker, 3000), [], 'no process of the command is left')
          assert.ok(Date.now() - t0 < 30000, `the child took ${Date.now() - t0} ms`)
          resolve()
        } catch (e) {
          reject(e)
        }
      })
    }).finally(() => fs.rmSync(dir, { recursive: true, force: true }))
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true })
    throw e
  }
})

// The main thread does not load the package, so it has no 'exit' handler
// of the package's: a worker's command was ended only by the worker's own
// teardown, which waited for it.
test('nodeworker26: process.exit() is not held by a worker command when only the worker loads the package', async () => {
  const { spawnSync } = require('node:child_process')
  const dir = tempDir()
  const marker = `sleep 30.${process.pid}${(Date.now() + 7) % 100000}`
  try {
    const script = `
      const { Worker } = require('node:worker_threads')
      const w = new Worker(
        "const { parentPort, workerData } = require('node:worker_threads');" +
        "const { Executor } = require(workerData.mod);" +
        "const x = Executor.fromOptions({ write_root: workerData.dir, enabled: true, timeout_ms: 86400000 });" +
        "x.exec(workerData.command).then((r) => parentPort.postMessage('settled ' + r.exitCode))",
        {
          eval: true,
          workerData: {
            mod: ${JSON.stringify(path.join(__dirname, '..'))},
            dir: ${JSON.stringify(dir)},
            command: ${JSON.stringify(`echo started > started; ${marker} & exec ${marker}`)},
          },
        },
      )
      w.on('message', (m) => console.log(m))
      const started = ${JSON.stringify(path.join(dir, 'started'))}
      const wait = () => (require('node:fs').existsSync(started) ? setTimeout(() => process.exit(7), 300) : setTimeout(wait, 20))
      wait()
    `
    const t0 = Date.now()
    const r = spawnSync(process.execPath, ['-e', script], { timeout: 60000, encoding: 'utf8' })
    assert.equal(r.signal, null, `the child was still running after 60 s (stderr: ${r.stderr})`)
    assert.equal(r.status, 7, r.stderr)
    assert.ok(Date.now() - t0 < 10000, `the exit took ${Date.now() - t0} ms`)
    assert.ok(!r.stdout.includes('settled'), r.stdout)
    assert.deepEqual(await untilNone(marker, 3000), [], 'no process of the command is left')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
