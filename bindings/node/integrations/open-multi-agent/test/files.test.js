'use strict'
// createSandgateFileTools against open-multi-agent's documented file-tool
// contract (packages/core/src/tool/built-in/*.ts and ToolDefinition in
// packages/core/src/types.ts there): the five names, their input fields and
// which are required, results `{ data, isError }` with OMA's texts, never a
// rejection. OMA itself cannot be installed here; its executor validates
// input with `inputSchema.safeParse` before `execute`, which the tests do too.
// Real files in real directories.

const { test } = require('node:test')
const { spawnSync } = require('node:child_process')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { createSandgateFileTools } = require('..')
const { Sandbox } = require('../../../index.js')

function tree() {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-omafiles-')))
  const app = path.join(dir, 'app')
  fs.mkdirSync(path.join(app, 'src', 'lib'), { recursive: true })
  fs.mkdirSync(path.join(app, 'node_modules', 'dep'), { recursive: true })
  fs.mkdirSync(path.join(dir, 'app-secrets'))
  fs.writeFileSync(path.join(dir, 'app-secrets', 'key'), 'secret\n')
  fs.writeFileSync(path.join(app, 'notes.txt'), 'one\ntwo\nthree\n')
  fs.writeFileSync(path.join(app, 'src', 'main.js'), 'const a = 1\nconsole.log(a)\n')
  fs.writeFileSync(path.join(app, 'src', 'lib', 'util.js'), 'export const b = 2 // TODO\n')
  fs.writeFileSync(path.join(app, 'node_modules', 'dep', 'index.js'), 'module.exports = 1 // TODO\n')
  return { dir, app }
}

function byName(tools) {
  return Object.fromEntries(tools.map((t) => [t.name, t]))
}

/** What OMA's executor does with a tool call: validate, then execute. */
async function call(tool, input) {
  const parsed = tool.inputSchema.safeParse(input)
  assert.ok(parsed.success, `input refused by ${tool.name}'s schema: ${JSON.stringify(input)}`)
  return tool.execute(parsed.data, { agent: { name: 't', role: 't', model: 't' } })
}

test('the five tools carry OMA names, input fields, required keys and side-effect flags', () => {
  const { app } = tree()
  const tools = createSandgateFileTools({ write_root: app })
  assert.deepEqual(
    tools.map((t) => t.name),
    ['file_read', 'file_write', 'file_edit', 'glob', 'grep'],
  )
  const shape = (t) => {
    const s = t.inputSchema.shape
    return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, v.isOptional() ? 'optional' : 'required']))
  }
  const t = byName(tools)
  assert.deepEqual(shape(t.file_read), { path: 'required', offset: 'optional', limit: 'optional' })
  assert.deepEqual(shape(t.file_write), { path: 'required', content: 'required' })
  assert.deepEqual(shape(t.file_edit), {
    path: 'required',
    old_string: 'required',
    new_string: 'required',
    replace_all: 'optional',
  })
  assert.deepEqual(shape(t.glob), { path: 'optional', pattern: 'optional', maxFiles: 'optional' })
  assert.deepEqual(shape(t.grep), { pattern: 'required', path: 'optional', glob: 'optional', maxResults: 'optional' })
  assert.equal(t.file_write.consequential, true)
  assert.equal(t.file_edit.consequential, true)
  assert.ok(!t.file_read.consequential && !t.glob.consequential && !t.grep.consequential)
  // OMA's numeric bounds: offset >= 0, limit and the caps > 0, integers.
  assert.equal(t.file_read.inputSchema.safeParse({ path: 'a', offset: -1 }).success, false)
  assert.equal(t.file_read.inputSchema.safeParse({ path: 'a', limit: 0 }).success, false)
  assert.equal(t.glob.inputSchema.safeParse({ maxFiles: 1.5 }).success, false)
  assert.equal(t.grep.inputSchema.safeParse({}).success, false)
  for (const tool of tools) assert.equal(typeof tool.description, 'string')
})

test('file_read answers numbered lines, slices and OMA texts for the end and for errors', async () => {
  const { app } = tree()
  const { file_read } = byName(createSandgateFileTools({ write_root: app }))
  const abs = path.join(app, 'notes.txt')
  assert.deepEqual(await call(file_read, { path: abs }), { data: '1\tone\n2\ttwo\n3\tthree', isError: false })
  assert.deepEqual(await call(file_read, { path: abs, offset: 2, limit: 1 }), {
    data: '2\ttwo\n\n(showing lines 2\u20132 of 3)',
    isError: false,
  })
  assert.deepEqual(await call(file_read, { path: abs, offset: 9 }), {
    data: `File "${abs}" has 3 lines but offset 9 is beyond the end.`,
    isError: true,
  })
  // A root-relative name is read too.
  assert.equal((await call(file_read, { path: 'src/main.js' })).data, '1\tconst a = 1\n2\tconsole.log(a)')
  const missing = await call(file_read, { path: path.join(app, 'nope.txt') })
  assert.equal(missing.isError, true)
  assert.match(missing.data, /^Could not read file ".*nope\.txt": E_NOT_FOUND/)
})

test('a prefix sibling of the root is outside it: /x/app-secrets is refused, never read', async () => {
  const { dir, app } = tree()
  const t = byName(createSandgateFileTools({ write_root: app }))
  const secret = path.join(dir, 'app-secrets', 'key')
  const r = await call(t.file_read, { path: secret })
  assert.equal(r.isError, true)
  assert.match(r.data, /E_PATH_ESCAPE/)
  assert.doesNotMatch(r.data, /secret\n/)
  const w = await call(t.file_write, { path: path.join(dir, 'app-secrets', 'new'), content: 'x' })
  assert.equal(w.isError, true)
  assert.equal(fs.existsSync(path.join(dir, 'app-secrets', 'new')), false)
  const up = await call(t.file_read, { path: path.join(app, '..', 'app-secrets', 'key') })
  assert.equal(up.isError, true)
  assert.match(up.data, /E_PATH_INVALID|E_PATH_ESCAPE/)
})

test('file_write creates with parents, then updates, with OMA texts', async () => {
  const { app } = tree()
  const { file_write } = byName(createSandgateFileTools({ write_root: app }))
  const target = path.join(app, 'out', 'deep', 'new.txt')
  assert.deepEqual(await call(file_write, { path: target, content: 'a\nb\u00e9' }), {
    data: `Created "${target}" (2 lines, 5 bytes).`,
    isError: false,
  })
  assert.equal(fs.readFileSync(target, 'utf8'), 'a\nb\u00e9')
  assert.deepEqual(await call(file_write, { path: target, content: 'x' }), {
    data: `Updated "${target}" (1 line, 1 bytes).`,
    isError: false,
  })
  assert.equal(fs.readFileSync(target, 'utf8'), 'x')
})

test('file_write honours allow_overwrite = false: a second write is refused and the file kept', async () => {
  const { app } = tree()
  const { file_write } = byName(createSandgateFileTools({ write_root: app, allow_overwrite: false }))
  const target = path.join(app, 'notes.txt')
  const r = await call(file_write, { path: target, content: 'gone' })
  assert.equal(r.isError, true)
  assert.match(r.data, /^Failed to write file ".*notes\.txt": E_EXISTS/)
  assert.equal(fs.readFileSync(target, 'utf8'), 'one\ntwo\nthree\n')
})

test('file_edit replaces once or all, and answers OMA texts for none, many and an empty string', async () => {
  const { app } = tree()
  const { file_edit } = byName(createSandgateFileTools({ write_root: app }))
  const f = path.join(app, 'e.txt')
  fs.writeFileSync(f, 'x-y-x-$&')
  assert.deepEqual(await call(file_edit, { path: f, old_string: 'y', new_string: 'Y' }), {
    data: `Replaced 1 occurrence in "${f}".`,
    isError: false,
  })
  const many = await call(file_edit, { path: f, old_string: 'x', new_string: 'z' })
  assert.equal(many.isError, true)
  assert.match(many.data, /^`old_string` appears 2 times in ".*e\.txt"\./)
  assert.equal(fs.readFileSync(f, 'utf8'), 'x-Y-x-$&')
  assert.deepEqual(await call(file_edit, { path: f, old_string: 'x', new_string: '$&!', replace_all: true }), {
    data: `Replaced 2 occurrences in "${f}".`,
    isError: false,
  })
  // The replacement is literal text.
  assert.equal(fs.readFileSync(f, 'utf8'), '$&!-Y-$&!-$&')
  const none = await call(file_edit, { path: f, old_string: 'absent', new_string: 'q' })
  assert.equal(none.isError, true)
  assert.match(none.data, /^The string to replace was not found in ".*e\.txt"\.\n/)
  const empty = await call(file_edit, { path: f, old_string: '', new_string: 'q' })
  assert.deepEqual(empty, { data: none.data, isError: true })
  assert.equal(fs.readFileSync(f, 'utf8'), '$&!-Y-$&!-$&')
})

test('glob lists by name at every depth, skips node_modules, caps with a note', async () => {
  const { app } = tree()
  const { glob } = byName(createSandgateFileTools({ write_root: app }))
  assert.deepEqual(await call(glob, { pattern: '*.js' }), { data: 'src/lib/util.js\nsrc/main.js', isError: false })
  assert.deepEqual(await call(glob, { pattern: '**/*.js', path: path.join(app, 'src', 'lib') }), {
    data: 'src/lib/util.js',
    isError: false,
  })
  assert.deepEqual(await call(glob, { pattern: '*.rs' }), { data: 'No files matched.', isError: false })
  assert.deepEqual(await call(glob, { pattern: '*.js', maxFiles: 1 }), {
    data: 'src/lib/util.js\n\n(listing capped at 1 paths; raise maxFiles for more)',
    isError: false,
  })
  // A file named directly is answered when its name matches.
  assert.deepEqual(await call(glob, { path: path.join(app, 'src', 'main.js'), pattern: '*.js' }), {
    data: 'src/main.js',
    isError: false,
  })
  // Searching inside a skipped directory named as the base still works.
  assert.equal((await call(glob, { path: path.join(app, 'node_modules'), pattern: '*.js' })).data, 'node_modules/dep/index.js')
})

test('grep answers path:line:text, filters by glob, skips node_modules, refuses a bad regex', async () => {
  const { app } = tree()
  const { grep } = byName(createSandgateFileTools({ write_root: app }))
  assert.deepEqual(await call(grep, { pattern: 'TODO' }), {
    data: 'src/lib/util.js:1:export const b = 2 // TODO',
    isError: false,
  })
  assert.deepEqual(await call(grep, { pattern: 'console', glob: '*.js' }), {
    data: 'src/main.js:2:console.log(a)',
    isError: false,
  })
  assert.deepEqual(await call(grep, { pattern: 'console', glob: '*.txt' }), { data: 'No matches found.', isError: false })
  assert.deepEqual(await call(grep, { pattern: '(' }), { data: 'Invalid regular expression: "("', isError: true })
  assert.deepEqual(await call(grep, { pattern: 'o', path: path.join(app, 'notes.txt'), maxResults: 2 }), {
    data: 'notes.txt:1:one\nnotes.txt:2:two\n\n(results capped at 2; use maxResults to raise the limit)',
    isError: false,
  })
})

test('the run\'s abortSignal stops glob and grep: an error result, never a rejection', async () => {
  const { app } = tree()
  const { glob, grep } = byName(createSandgateFileTools({ write_root: app }))
  const aborted = AbortSignal.abort()
  const context = { agent: { name: 't', role: 't', model: 't' }, abortSignal: aborted }
  for (const [tool, input] of [
    [glob, { pattern: '*.js' }],
    [glob, { path: path.join(app, 'src', 'main.js'), pattern: '*.js' }],
    [grep, { pattern: 'TODO' }],
    [grep, { pattern: 'console', glob: '*.js' }],
  ]) {
    assert.ok(tool.inputSchema.safeParse(input).success)
    const r = await tool.execute(input, context)
    assert.equal(r.isError, true, `${tool.name} ${JSON.stringify(input)}: ${r.data}`)
    assert.match(r.data, /abort/i, r.data)
  }
  // A live signal changes nothing.
  const live = { agent: context.agent, abortSignal: new AbortController().signal }
  assert.deepEqual(await grep.execute({ pattern: 'TODO' }, live), {
    data: 'src/lib/util.js:1:export const b = 2 // TODO',
    isError: false,
  })
  assert.equal((await glob.execute({ pattern: '*.js' }, live)).isError, false)
})

test('a search base spelled with ./, // or a trailing / searches and skips as its plain spelling', async () => {
  const { app } = tree()
  fs.mkdirSync(path.join(app, 'src', 'rebuild'))
  fs.writeFileSync(path.join(app, 'src', 'rebuild', 'r.js'), 'kept // TODO\n')
  fs.mkdirSync(path.join(app, 'src', 'node_modules'))
  fs.writeFileSync(path.join(app, 'src', 'node_modules', 'm.js'), 'skipped // TODO\n')
  const { glob, grep } = byName(createSandgateFileTools({ write_root: app }))
  const listed = 'src/lib/util.js\nsrc/main.js\nsrc/rebuild/r.js'
  const hits = 'src/lib/util.js:1:export const b = 2 // TODO\nsrc/rebuild/r.js:1:kept // TODO'
  for (const base of ['src', './src', 'src/', './src/', 'src/.', path.join(app, 'src') + '/', `${app}/./src`]) {
    assert.deepEqual(await call(glob, { path: base, pattern: '*.js' }), { data: listed, isError: false }, base)
    assert.deepEqual(await call(grep, { pattern: 'TODO', path: base }), { data: hits, isError: false }, base)
  }
  for (const file of ['./src/main.js', 'src//main.js', `${app}/./src/main.js`]) {
    assert.deepEqual(await call(glob, { path: file, pattern: '*.js' }), { data: 'src/main.js', isError: false }, file)
    assert.deepEqual(await call(glob, { path: file }), { data: 'src/main.js', isError: false }, file)
  }
  // An empty path is still refused, not taken for the root.
  assert.match((await call(glob, { path: '' })).data, /^Cannot access path "": E_PATH_INVALID/)
  assert.match((await call(grep, { pattern: 'TODO', path: '' })).data, /^Cannot access path "": E_PATH_INVALID/)
})

test('matches in skipped directories never crowd out the answer, and a cap that cut it is always noted', async () => {
  const { app } = tree()
  // sandgate walks names in order: node_modules before zz.
  fs.writeFileSync(path.join(app, 'node_modules', 'dep', 'more.js'), 'TODO\n'.repeat(5))
  fs.mkdirSync(path.join(app, 'zz'))
  fs.writeFileSync(path.join(app, 'zz', 'real.js'), 'real TODO\n')
  const { glob, grep } = byName(createSandgateFileTools({ write_root: app }))
  // Three node_modules hits first filled a cap of 3; the match outside was never seen.
  assert.deepEqual(await call(grep, { pattern: 'TODO', maxResults: 3 }), {
    data: 'src/lib/util.js:1:export const b = 2 // TODO\nzz/real.js:1:real TODO',
    isError: false,
  })
  // More skipped hits than sandgate answers at all: never a bare "No matches found.".
  fs.writeFileSync(path.join(app, 'node_modules', 'dep', 'more.js'), 'TODO\n'.repeat(1100))
  const crowded = await call(grep, { pattern: 'real' , path: '.', maxResults: 3 })
  assert.deepEqual(crowded, { data: 'zz/real.js:1:real TODO', isError: false })
  const full = await call(grep, { pattern: 'TODO', maxResults: 3 })
  assert.equal(full.isError, false)
  assert.notEqual(full.data, 'No matches found.')
  assert.match(full.data, /\(results capped/, full.data)
  // glob: sandgate answers at most 1000 paths; a listing it cut says so even when maxFiles is larger.
  fs.mkdirSync(path.join(app, 'big'))
  for (let i = 0; i < 1100; i++) fs.writeFileSync(path.join(app, 'big', `f${String(i).padStart(4, '0')}.txt`), '')
  const listed = await call(glob, { path: 'big', pattern: '*.txt', maxFiles: 2000 })
  assert.equal(listed.isError, false)
  assert.equal(listed.data.split('\n').filter((l) => l.startsWith('big/')).length, 1000)
  assert.match(listed.data, /\n\n\(listing capped at 1000 paths/, listed.data.slice(-200))
})

test('the escapes OMA allows are refused: a dangling in-root symlink, an in-root hard link', async () => {
  const { dir, app } = tree()
  const t = byName(createSandgateFileTools({ write_root: app }))
  const outside = path.join(dir, 'created-outside')
  fs.symlinkSync(outside, path.join(app, 'dangling'))
  const w = await call(t.file_write, { path: path.join(app, 'dangling'), content: 'pwned' })
  assert.equal(w.isError, true)
  assert.equal(fs.existsSync(outside), false)

  const victim = path.join(dir, 'victim')
  fs.writeFileSync(victim, 'original')
  fs.linkSync(victim, path.join(app, 'hard'))
  const e = await call(t.file_edit, { path: path.join(app, 'hard'), old_string: 'original', new_string: 'changed' })
  assert.equal(e.isError, true)
  assert.match(e.data, /E_HARDLINK/)
  assert.equal(fs.readFileSync(victim, 'utf8'), 'original')
})

test('one sandbox serves all five tools: one budget, one audit trail', async () => {
  const { app } = tree()
  const events = []
  const tools = createSandgateFileTools({ write_root: app, fs_ops: 3 }, { audit: (ev) => events.push(ev) })
  const t = byName(tools)
  assert.equal(tools.sandbox.fsOpsRemaining, 3)
  assert.equal((await call(t.file_read, { path: 'notes.txt' })).isError, false)
  assert.equal((await call(t.grep, { pattern: 'one' })).isError, false)
  assert.equal((await call(t.file_write, { path: 'w.txt', content: 'w' })).isError, false)
  assert.equal(tools.sandbox.fsOpsRemaining, 0)
  const spent = await call(t.glob, { pattern: '*' })
  assert.equal(spent.isError, true)
  assert.match(spent.data, /E_/)
  // Audit events arrive on a later turn of the event loop.
  await new Promise((r) => setImmediate(r))
  assert.deepEqual(
    events.map((ev) => ev.op).slice(0, 3),
    ['read', 'grep', 'write'],
  )
})

test('a host path outside every root is audited as refused, by each tool', async () => {
  const { dir, app } = tree()
  const events = []
  const t = byName(createSandgateFileTools({ write_root: app }, { audit: (ev) => events.push(ev) }))
  const secret = path.join(dir, 'app-secrets', 'key')
  assert.equal((await call(t.file_read, { path: secret })).isError, true)
  assert.equal((await call(t.file_write, { path: secret, content: 'x' })).isError, true)
  assert.equal((await call(t.file_edit, { path: secret, old_string: 'secret', new_string: 'x' })).isError, true)
  assert.equal((await call(t.glob, { path: '/etc' })).isError, true)
  assert.equal((await call(t.grep, { pattern: 'root', path: '/etc' })).isError, true)
  await new Promise((r) => setTimeout(r, 20))
  assert.deepEqual(
    events.map((ev) => [ev.op, ev.path, ev.outcome]),
    [
      ['read', secret, 'E_PATH_ESCAPE'],
      ['write', secret, 'E_PATH_ESCAPE'],
      ['edit', secret, 'E_PATH_ESCAPE'],
      ['glob', '/etc', 'E_PATH_ESCAPE'],
      ['grep', '/etc', 'E_PATH_ESCAPE'],
    ],
  )
  for (const ev of events) assert.equal(typeof ev.time, 'number')
  assert.equal(fs.readFileSync(secret, 'utf8'), 'secret\n')
})

test('a symlinked root answers host paths spelled both ways, from keys or a Sandbox', async () => {
  const { dir, app } = tree()
  const link = path.join(dir, 'app-link')
  fs.symlinkSync(app, link)
  const sandbox = new Sandbox({ readRoots: [link], writeRoot: link })
  const given = createSandgateFileTools(sandbox)
  assert.equal(given.sandbox, sandbox)
  for (const tools of [given, createSandgateFileTools({ write_root: link })]) {
    const { file_read, file_write } = byName(tools)
    for (const p of [path.join(link, 'notes.txt'), path.join(app, 'notes.txt')]) {
      assert.deepEqual(await call(file_read, { path: p, limit: 1 }), {
        data: '1\tone\n\n(showing lines 1\u20131 of 3)',
        isError: false,
      })
    }
    const w = await call(file_write, { path: path.join(link, 'via-link.txt'), content: 'l' })
    assert.equal(w.isError, false, w.data)
    const sibling = await call(file_read, { path: `${link}-secrets/key` })
    assert.equal(sibling.isError, true)
    assert.match(sibling.data, /E_PATH_ESCAPE/)
  }
  assert.equal(fs.readFileSync(path.join(app, 'via-link.txt'), 'utf8'), 'l')
})

// The binding delivers audit events on the event loop, where a throw is an
// uncaught exception; the tools catch it so a broken logger cannot end the
// host's run in the middle of a tool call.
test('an audit callback that throws does not end the process; its errors are kept', () => {
  const { app } = tree()
  const script = `
    const { createSandgateFileTools } = require(${JSON.stringify(path.resolve(__dirname, '..'))})
    let seen = 0
    const tools = createSandgateFileTools({ write_root: ${JSON.stringify(app)} }, {
      audit: () => { seen++; throw new Error('log stream closed') },
    })
    process.on('warning', (w) => process.stderr.write('warning: ' + w.message + '\\n'))
    const read = tools.find((t) => t.name === 'file_read')
    ;(async () => {
      const r = await read.execute({ path: 'notes.txt' })
      await new Promise((done) => setTimeout(done, 50))
      const again = await read.execute({ path: 'nope.txt' })
      await new Promise((done) => setTimeout(done, 50))
      process.stdout.write(JSON.stringify({ r, again, seen, errors: tools.auditErrors.map((e) => e.message) }))
    })()`
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 })
  assert.equal(child.status, 0, child.stderr)
  const out = JSON.parse(child.stdout)
  assert.equal(out.r.isError, false)
  assert.equal(out.again.isError, true)
  assert.equal(out.seen, 2)
  assert.deepEqual(out.errors, ['log stream closed', 'log stream closed'])
  assert.match(child.stderr, /warning: .*audit callback threw: log stream closed/)
})
