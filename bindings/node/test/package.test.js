// The package's entry point and types: a missing addon names the package
// to install; index.d.ts's ErrorCode union is exactly the code table.
'use strict'

const assert = require('node:assert/strict')
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const test = require('node:test')

const here = path.join(__dirname, '..')

test('a copy of the package without its addon says which package is missing', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-noaddon-'))
  try {
    const pkg = path.join(dir, 'node_modules', 'sandgate')
    fs.mkdirSync(pkg, { recursive: true })
    for (const f of ['index.js', 'binding.js', 'package.json']) {
      fs.copyFileSync(path.join(here, f), path.join(pkg, f))
    }
    const r = spawnSync(process.execPath, ['-e', "require('sandgate')"], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: '' },
    })
    assert.notEqual(r.status, 0)
    // The thrown error's own message (the generated loader's rides along as
    // its cause).
    const line = r.stderr.split('\n').find((l) => l.startsWith('Error: ')) || ''
    assert.match(line, /^Error: sandgate: the native addon for linux-x64-gnu is missing/)
    assert.match(line, /npm install sandgate-linux-x64-gnu@0\.1\.0/)
    assert.doesNotMatch(line, /npm has a bug/)
    assert.match(r.stderr, /code: 'ERR_SANDGATE_ADDON_MISSING'/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('an installed platform package whose addon fails to load is named with the reason, not called missing', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-badaddon-'))
  try {
    const pkg = path.join(dir, 'node_modules', 'sandgate')
    fs.mkdirSync(pkg, { recursive: true })
    for (const f of ['index.js', 'binding.js', 'package.json']) {
      fs.copyFileSync(path.join(here, f), path.join(pkg, f))
    }
    // The platform package as npm installs it, its addon damaged (what a
    // glibc older than the addon needs also ends in: a failed dlopen).
    const plat = path.join(dir, 'node_modules', 'sandgate-linux-x64-gnu')
    fs.mkdirSync(plat)
    fs.copyFileSync(path.join(here, 'npm', 'linux-x64-gnu', 'package.json'), path.join(plat, 'package.json'))
    fs.writeFileSync(path.join(plat, 'sandgate.linux-x64-gnu.node'), 'not an ELF file')
    const r = spawnSync(process.execPath, ['-e', "require('sandgate')"], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: '' },
    })
    assert.notEqual(r.status, 0)
    const line = r.stderr.split('\n').find((l) => l.startsWith('Error: ')) || ''
    assert.match(
      line,
      /^Error: sandgate: the native addon for linux-x64-gnu \(the package sandgate-linux-x64-gnu@0\.1\.0\) is installed but failed to load: /,
    )
    assert.match(line, /sandgate\.linux-x64-gnu\.node/)
    assert.doesNotMatch(line, /not installed/)
    assert.match(r.stderr, /code: 'ERR_SANDGATE_ADDON_LOAD'/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('the addon loads through index.js in the checkout', () => {
  const out = execFileSync(process.execPath, ['-e', "console.log(typeof require('./index.js').Sandbox)"], {
    cwd: here,
    encoding: 'utf8',
  })
  assert.equal(out.trim(), 'function')
})

test('ErrorCode in index.d.ts lists exactly the codes of crates/codes', () => {
  const table = fs.readFileSync(path.join(here, '..', '..', 'crates', 'codes', 'src', 'lib.rs'), 'utf8')
  const want = [...table.matchAll(/=\s*\d+,\s*"(E_[A-Z_]+)"/g)].map((m) => m[1]).sort()
  assert.ok(want.length > 20, `found only ${want.length} codes in the table`)
  const dts = fs.readFileSync(path.join(here, 'index.d.ts'), 'utf8')
  const union = dts.slice(dts.indexOf('export type ErrorCode'), dts.indexOf('export interface SandgateError'))
  const got = [...union.matchAll(/'(E_[A-Z_]+)'/g)].map((m) => m[1]).sort()
  assert.deepEqual(got, want)
})
