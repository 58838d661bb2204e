'use strict'
// SandgateShellExecutor against open-multi-agent's documented ShellExecutor
// contract (packages/core/src/tool/shell/types.ts there): optional start and
// dispose, exec(command, { cwd, timeoutMs, abortSignal }) resolving
// { stdout, stderr, exitCode } with 124 on timeout, 130 on abort and 127
// when the command cannot start. Real processes, real directories.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { SandgateShellExecutor } = require('..')

function tree() {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-oma-')))
  fs.mkdirSync(path.join(dir, 'app', 'sub'), { recursive: true })
  fs.mkdirSync(path.join(dir, 'app-secrets'))
  fs.writeFileSync(path.join(dir, 'app-secrets', 'key'), 'secret\n')
  return dir
}

test('a command resolves stdout, stderr and exit code, and nothing else', async () => {
  const dir = tree()
  const sh = new SandgateShellExecutor({ write_root: path.join(dir, 'app') })
  await sh.start()
  try {
    const r = await sh.exec('echo out; echo err >&2; exit 3', { timeoutMs: 10000 })
    assert.deepEqual(Object.keys(r).sort(), ['exitCode', 'stderr', 'stdout'])
    assert.deepEqual(r, { stdout: 'out\n', stderr: 'err\n', exitCode: 3 })
    const here = await sh.exec('pwd', { cwd: path.join(dir, 'app', 'sub'), timeoutMs: 10000 })
    assert.equal(here.exitCode, 0)
    assert.equal(here.stdout.trim(), path.join(dir, 'app', 'sub'))
  } finally {
    await sh.dispose()
  }
})

test('timeout is 124, abort is 130, an aborted signal ends at once', async () => {
  const dir = tree()
  const sh = new SandgateShellExecutor({ write_root: path.join(dir, 'app') })
  await sh.start()
  try {
    const t0 = Date.now()
    assert.equal((await sh.exec('sleep 10', { timeoutMs: 200 })).exitCode, 124)
    const ac = new AbortController()
    setTimeout(() => ac.abort(), 200)
    assert.equal((await sh.exec('sleep 10', { timeoutMs: 10000, abortSignal: ac.signal })).exitCode, 130)
    assert.equal((await sh.exec('sleep 10', { timeoutMs: 10000, abortSignal: ac.signal })).exitCode, 130)
    assert.ok(Date.now() - t0 < 8000)
  } finally {
    await sh.dispose()
  }
})

test('a refusal before start resolves 127 with the reason on stderr, never rejects', async () => {
  const dir = tree()
  const marker = path.join(dir, 'app', 'ran')
  const sh = new SandgateShellExecutor({ write_root: path.join(dir, 'app') })
  await sh.start()
  try {
    for (const cwd of [path.join(dir, 'app-secrets'), '/tmp', '../app-secrets']) {
      const r = await sh.exec(`touch ${marker}`, { cwd, timeoutMs: 10000 })
      assert.equal(r.exitCode, 127, cwd)
      assert.equal(r.stdout, '')
      assert.match(r.stderr, /^sandgate: E_PATH_(ESCAPE|INVALID)/, cwd)
      assert.ok(!r.stderr.includes('app-secrets'), r.stderr)
    }
    assert.ok(!fs.existsSync(marker), 'a refused command ran')
  } finally {
    await sh.dispose()
  }
  const off = new SandgateShellExecutor({ write_root: path.join(dir, 'app'), enabled: false })
  await off.start()
  const r = await off.exec('true', { timeoutMs: 1000 })
  assert.equal(r.exitCode, 127)
  assert.match(r.stderr, /E_DENIED/)
  await off.dispose()
})

// OMA's bash tool passes the model's `timeout` (zod: any number) as
// timeoutMs; LocalShellExecutor hands it to setTimeout, so a fraction, zero
// or a huge value still runs under a deadline.
test('any timeoutMs a model can give runs the command under a deadline, never refused', async () => {
  const dir = tree()
  const sh = new SandgateShellExecutor({ write_root: path.join(dir, 'app'), timeout_ms: 2000 })
  await sh.start()
  try {
    for (const timeoutMs of [1500.5, 2 ** 53 + 2, 1e20, Infinity]) {
      const r = await sh.exec('echo ran', { timeoutMs })
      assert.equal(r.exitCode, 0, `${timeoutMs}: ${r.stderr}`)
      assert.equal(r.stdout, 'ran\n')
    }
    // No time at all, as setTimeout(0) gives LocalShellExecutor: the deadline passes at once.
    for (const timeoutMs of [0, -5, 0.25]) {
      const r = await sh.exec('sleep 5', { timeoutMs })
      assert.equal(r.exitCode, 124, `${timeoutMs}: ${r.stderr}`)
    }
    // Still under the policy's deadline.
    const t0 = Date.now()
    assert.equal((await sh.exec('sleep 10', { timeoutMs: 1e20 })).exitCode, 124)
    assert.ok(Date.now() - t0 < 8000)
  } finally {
    await sh.dispose()
  }
})

test('a timeout over the policy runs under the policy and says so on stderr', async () => {
  const dir = tree()
  const sh = new SandgateShellExecutor({ write_root: path.join(dir, 'app'), timeout_ms: 300 })
  try {
    const r = await sh.exec('sleep 10', { timeoutMs: 60000 })
    assert.equal(r.exitCode, 124)
    assert.match(r.stderr, /sandgate: .*60000 ms.*exec\.timeout_ms \(300 ms\)/)
  } finally {
    await sh.dispose()
  }
})

test('start, dispose and start again, as one executor serves several runs', async () => {
  const dir = tree()
  const sh = new SandgateShellExecutor({ write_root: path.join(dir, 'app') })
  for (let run = 0; run < 2; run++) {
    await sh.start()
    assert.equal((await sh.exec('echo hi', { timeoutMs: 10000 })).stdout, 'hi\n')
    await sh.dispose()
  }
})

// process.exit() skips the addon's own cleanup at teardown, so without the
// exit hook the directory would outlive the process.
test('the private TMPDIR is removed when the process exits without dispose', () => {
  const dir = tree()
  const script = `
    const { SandgateShellExecutor } = require(${JSON.stringify(path.resolve(__dirname, '..'))})
    const sh = new SandgateShellExecutor({ write_root: ${JSON.stringify(path.join(dir, 'app'))} })
    sh.exec('echo "$TMPDIR"; test -d "$TMPDIR"', { timeoutMs: 10000 }).then((r) => {
      process.stdout.write(JSON.stringify(r))
      process.exit(0)
    })`
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 })
  assert.equal(child.status, 0, child.stderr)
  const r = JSON.parse(child.stdout)
  assert.equal(r.exitCode, 0, r.stderr)
  const tmpdir = r.stdout.trim()
  assert.ok(tmpdir.startsWith('/'), tmpdir)
  assert.ok(!fs.existsSync(tmpdir), `${tmpdir} outlived the process`)
})
