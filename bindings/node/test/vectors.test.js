'use strict'
// Runs the shared vectors in ../../tests/vectors/*.json (format:
// tests/vectors/README.md) through the Node API: Policy.load,
// Sandbox.fromPolicy, new Executor(policy), new Fetcher(policy), each
// request op mapped to its method and the result converted to the docs/reference/json-endpoint.md
// answer shape.
//
// Every case runs twice on a freshly built tree: once with the synchronous
// methods and once with the `…Async` ones (exec is always a promise).
// `wire` cases and wire steps are skipped (no JSON-lines endpoint here).
// SANDGATE_VECTOR=<substring> runs only the cases whose name contains it.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { Policy, Sandbox, Executor, Fetcher } = require('..')

const VECTORS = process.env.SANDGATE_VECTORS_DIR || path.join(__dirname, '..', '..', '..', 'tests', 'vectors')

// Cases that cannot pass through this binding for a real reason, by name,
// with the reason (also listed in README.md under deliberate differences).
const DELIBERATE = {}

// Ops of the JSON endpoint that this binding does not offer: every case
// with a (non-wire) step using one is skipped, naming the op.
const UNSUPPORTED_OPS = {}

function unsupported(c) {
  for (const s of c.steps || []) {
    if (s.wire || s.line !== undefined) continue
    const why = UNSUPPORTED_OPS[s.request.op]
    if (why) return why
  }
  return false
}

const MAX_RANGE_LINES = 2000

function loadFiles() {
  return fs
    .readdirSync(VECTORS)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ file: f, doc: JSON.parse(fs.readFileSync(path.join(VECTORS, f), 'utf8')) }))
}

// ---------------------------------------------------------------------------
// Trees

function expand(text, dir) {
  return text.split('{case_dir}').join(dir)
}

function setMode(p, e) {
  if (e.mode !== undefined) fs.chmodSync(p, parseInt(e.mode, 8))
}

function build(c, dir) {
  for (const e of c.tree || []) {
    const p = path.join(dir, e.path)
    fs.mkdirSync(path.dirname(p), { recursive: true })
    if (e.file !== undefined) fs.writeFileSync(p, e.file)
    else if (e.file_base64 !== undefined) fs.writeFileSync(p, Buffer.from(e.file_base64, 'base64'))
    else if (e.dir !== undefined) fs.mkdirSync(p, { recursive: true })
    else if (e.symlink !== undefined) fs.symlinkSync(expand(e.symlink, dir), p)
    else if (e.hardlink !== undefined) fs.linkSync(path.join(dir, e.hardlink), p)
    else throw new Error(`tree entry ${e.path}: unknown kind`)
    setMode(p, e)
  }
  fs.writeFileSync(path.join(dir, 'policy.toml'), expand(c.policy, dir))
}

function checkTreeAfter(c, dir) {
  const out = []
  for (const e of c.tree_after || []) {
    const p = path.join(dir, e.path)
    const fail = (m) => out.push(`tree_after \`${e.path}\`: ${m}`)
    let st
    try {
      st = fs.lstatSync(p)
    } catch (err) {
      if (!e.absent) fail(`missing (${err.code})`)
      continue
    }
    if (e.absent) {
      fail('must not exist')
      continue
    }
    const want =
      e.file !== undefined
        ? Buffer.from(e.file, 'utf8')
        : e.file_base64 !== undefined
          ? Buffer.from(e.file_base64, 'base64')
          : null
    if (want) {
      if (!st.isFile()) fail('must be a regular file')
      else {
        const got = fs.readFileSync(p)
        if (!got.equals(want)) fail(`content ${JSON.stringify(got.toString())}, want ${JSON.stringify(want.toString())}`)
      }
    } else if (e.dir) {
      if (!st.isDirectory()) fail('must be a directory')
      else if (e.entries) {
        const got = fs.readdirSync(p).sort()
        const wantNames = [...e.entries].sort()
        if (JSON.stringify(got) !== JSON.stringify(wantNames)) {
          fail(`entries ${JSON.stringify(got)}, want ${JSON.stringify(wantNames)}`)
        }
      }
    } else if (e.symlink !== undefined) {
      if (!st.isSymbolicLink()) fail('must be a symlink')
      else {
        const t = fs.readlinkSync(p)
        if (t !== expand(e.symlink, dir)) fail(`symlink to ${t}, want ${expand(e.symlink, dir)}`)
      }
    } else if (e.hardlink !== undefined) {
      const o = fs.lstatSync(path.join(dir, e.hardlink), { throwIfNoEntry: false })
      if (!o || o.ino !== st.ino || o.dev !== st.dev) fail(`must be the same file as \`${e.hardlink}\``)
    }
    if (e.mode !== undefined && (st.mode & 0o7777) !== parseInt(e.mode, 8)) {
      fail(`mode ${(st.mode & 0o7777).toString(8)}, want ${e.mode}`)
    }
  }
  return out
}

// ---------------------------------------------------------------------------
// Answers

function content(out, buf) {
  const text = decodeUtf8(buf)
  if (text === null) out.content_base64 = buf.toString('base64')
  else out.content = text
  return out
}

function decodeUtf8(buf) {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(buf)
  } catch {
    return null
  }
}

// A fetch hop in the JSON endpoint's shape (`hops_json` of crates/sandgate/src/tool.rs).
function hopJson(h) {
  return {
    url: h.url,
    method: h.method,
    addresses: h.addresses,
    status: h.status ?? null,
    allowed: h.allowed,
    reason: h.reason,
    rule: h.rule ?? null,
  }
}

function opt(v) {
  return v === undefined ? undefined : v
}

// Runs one request through the API; returns the JSON endpoint's answer fields (without
// `ok`). `mode` is 'sync' or 'async'.
async function call(session, req, mode) {
  const { policy, sandbox: sb, executor, fetcher } = session
  const a = mode === 'async'
  switch (req.op) {
    case 'summary':
      return { summary: policy.summary }
    case 'read': {
      if (req.offset === undefined && req.limit === undefined) {
        const buf = a ? await sb.readAsync(req.path) : sb.read(req.path)
        return content({ size: buf.length }, buf)
      }
      const r = a
        ? await sb.readLinesAsync(req.path, opt(req.offset), opt(req.limit))
        : sb.readLines(req.path, opt(req.offset), opt(req.limit))
      return content(
        {
          size: r.content.length,
          offset: r.offset,
          limit: req.limit === undefined ? MAX_RANGE_LINES : req.limit,
          lines: r.lines,
          total_lines: r.totalLines,
          truncated: r.truncated,
        },
        r.content,
      )
    }
    case 'write': {
      const data = req.content !== undefined ? req.content : Buffer.from(req.content_base64, 'base64')
      const options = req.overwrite === undefined ? undefined : { overwrite: req.overwrite }
      const size = a ? await sb.writeAsync(req.path, data, options) : sb.write(req.path, data, options)
      return { size }
    }
    case 'edit': {
      const options = req.all === undefined ? undefined : { all: req.all }
      const n = a
        ? await sb.editAsync(req.path, req.old, req.new, options)
        : sb.edit(req.path, req.old, req.new, options)
      return { replacements: n }
    }
    case 'list': {
      const entries = a ? await sb.listAsync(req.path) : sb.list(req.path)
      return { entries: entries.map((e) => ({ name: e.name, kind: e.kind, size: e.size })) }
    }
    case 'stat': {
      const s = a ? await sb.statAsync(req.path) : sb.stat(req.path)
      return { kind: s.kind, size: s.size, mode: s.mode }
    }
    case 'mkdir':
      if (a) await sb.mkdirAsync(req.path)
      else sb.mkdir(req.path)
      return {}
    case 'delete':
      if (a) await sb.deleteAsync(req.path)
      else sb.delete(req.path)
      return {}
    case 'rename':
      if (a) await sb.renameAsync(req.from, req.to)
      else sb.rename(req.from, req.to)
      return {}
    case 'glob': {
      const paths = a ? await sb.globAsync(req.pattern, opt(req.path)) : sb.glob(req.pattern, opt(req.path))
      return { paths }
    }
    case 'grep': {
      const found = a
        ? await sb.grepFoundAsync(req.pattern, opt(req.path), opt(req.max_results))
        : sb.grepFound(req.pattern, opt(req.path), opt(req.max_results))
      return {
        matches: found.matches.map((m) => ({
          path: m.path,
          line: m.line,
          text: m.text,
          ...(m.textStart ? { text_start: m.textStart } : {}),
          ...(m.lineTruncated ? { line_truncated: true } : {}),
        })),
        ...(found.binary ? { binary: found.binary } : {}),
      }
    }
    case 'exec': {
      const options = {}
      if (req.cwd !== undefined) options.cwd = req.cwd
      if (req.timeout_ms !== undefined) options.timeoutMs = req.timeout_ms
      const r = await executor.exec(req.command, options)
      return {
        exit_code: r.exitCode,
        stdout: r.stdout,
        stderr: r.stderr,
        truncated: r.truncated,
        timed_out: r.timedOut,
        aborted: r.aborted,
        confined: r.confined,
        env_names_digest: r.envNamesDigest,
        duration_ms: r.durationMs,
      }
    }
    case 'fetch': {
      const options = {}
      if (req.method !== undefined) options.method = req.method
      if (req.headers !== undefined) options.headers = req.headers
      if (req.body !== undefined) options.body = req.body
      if (req.body_base64 !== undefined) options.body = Buffer.from(req.body_base64, 'base64')
      if (req.timeout_ms !== undefined) options.timeoutMs = req.timeout_ms
      if (req.max_bytes !== undefined) options.maxBytes = req.max_bytes
      const r = a ? await fetcher.fetchAsync(req.url, options) : fetcher.fetch(req.url, options)
      const out = { status: r.status, headers: r.headers }
      const text = decodeUtf8(r.body)
      if (text === null) out.body_base64 = r.body.toString('base64')
      else out.body = text
      out.truncated = r.truncated
      out.hops = r.hops.map(hopJson)
      return out
    }
    default:
      throw new Error(`the runner does not map op \`${req.op}\``)
  }
}

function refusal(e) {
  if (!(e instanceof Error) || typeof e.code !== 'string' || !e.code.startsWith('E_')) throw e
  const error = { code: e.code, message: e.message }
  for (const k of ['path', 'pattern', 'key', 'rule']) if (e[k] !== undefined) error[k] = e[k]
  if (Array.isArray(e.hops)) error.hops = e.hops.map(hopJson)
  return { ok: false, error }
}

async function answer(session, req, mode) {
  try {
    return { ok: true, ...(await call(session, req, mode)) }
  } catch (e) {
    return refusal(e)
  }
}

function matches(expected, actual, at, out) {
  if (expected !== null && typeof expected === 'object' && !Array.isArray(expected)) {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) {
      out.push(`${at}: ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`)
      return
    }
    for (const [k, v] of Object.entries(expected)) {
      if (!(k in actual)) out.push(`${at}.${k}: missing, want ${JSON.stringify(v)}`)
      else matches(v, actual[k], `${at}.${k}`, out)
    }
  } else if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      out.push(`${at}: ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`)
      return
    }
    expected.forEach((v, i) => matches(v, actual[i], `${at}[${i}]`, out))
  } else if (expected !== actual) {
    out.push(`${at}: ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`)
  }
}

function checkAnswer(expect, ans) {
  const out = []
  if (ans.ok !== expect.ok) return [`want ok=${expect.ok}, got ${JSON.stringify(ans)}`]
  if (expect.ok) {
    const fields = { ...expect }
    delete fields.ok
    matches(fields, ans, 'answer', out)
  } else {
    for (const k of ['code', 'path', 'pattern', 'key']) {
      if (!(k in expect)) continue
      const got = ans.error[k]
      if (expect[k] === null) {
        if (got !== undefined) out.push(`error.${k}: ${JSON.stringify(got)}, want none`)
      } else if (got !== expect[k]) {
        out.push(`error.${k}: ${JSON.stringify(got)}, want ${JSON.stringify(expect[k])}`)
      }
    }
    if (typeof ans.error.message !== 'string') out.push('error.message: missing')
    if (out.length) out.push(`  (answer: ${JSON.stringify(ans)})`)
  }
  return out
}

// ---------------------------------------------------------------------------
// One case

function open(dir) {
  const policy = Policy.load(path.join(dir, 'policy.toml'))
  const sandbox = Sandbox.fromPolicy(policy)
  const executor = new Executor(policy)
  const fetcher = new Fetcher(policy)
  return { policy, sandbox, executor, fetcher }
}

async function runCase(c, mode) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-')))
  try {
    build(c, dir)
    if (c.policy_error) {
      let session
      try {
        session = open(dir)
      } catch (e) {
        const out = []
        if (e.code !== c.policy_error.code) out.push(`policy refused with ${e.code}, want ${c.policy_error.code}: ${e.message}`)
        if ('key' in c.policy_error && e.key !== c.policy_error.key) {
          out.push(`policy refused naming key ${JSON.stringify(e.key)}, want ${JSON.stringify(c.policy_error.key)}`)
        }
        return out
      }
      await session.executor.dispose()
      return [`the policy loaded; want it refused with ${JSON.stringify(c.policy_error)}`]
    }
    let session
    try {
      session = open(dir)
    } catch (e) {
      return [`the policy was refused: ${e.code} ${e.key} ${e.message}`]
    }
    const out = []
    try {
      for (const [i, step] of c.steps.entries()) {
        if (step.wire || step.line !== undefined) continue
        const ans = await answer(session, step.request, mode)
        const diffs = checkAnswer(step.expect, ans)
        if (step.request.op !== 'summary' && JSON.stringify(ans).includes(dir)) {
          diffs.push(`the answer names a host path: ${JSON.stringify(ans)}`)
        }
        for (const d of diffs) out.push(`step ${i} ${JSON.stringify(step.request)}: ${d}`)
      }
    } finally {
      session.sandbox.close()
      await session.executor.dispose()
    }
    out.push(...checkTreeAfter(c, dir))
    return out
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------
// Tests

const filter = process.env.SANDGATE_VECTOR
const files = loadFiles()

test('the vector files hold at least 100 cases with unique names', () => {
  const names = new Set()
  let n = 0
  for (const { doc } of files) {
    for (const c of doc.cases) {
      assert.ok(!names.has(c.name), `case name used twice: ${c.name}`)
      names.add(c.name)
      n++
    }
  }
  assert.ok(n >= 100, `${n} cases`)
})

for (const { file, doc } of files) {
  describe(file, () => {
    for (const c of doc.cases) {
      if (filter && !c.name.includes(filter)) continue
      const skip = c.wire ? 'wire case (JSON-lines endpoint only)' : DELIBERATE[c.name] || unsupported(c)
      test(c.name, { skip }, async () => {
        const failures = []
        for (const mode of ['sync', 'async']) {
          for (const d of await runCase(c, mode)) failures.push(`[${mode}] ${d}`)
        }
        assert.deepEqual(failures, [], `${file}: ${c.name}\n${failures.join('\n')}`)
      })
    }
  })
}
