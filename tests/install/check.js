// Fresh-install check of the npm package: a confined read, a refused escape
// and a confined command, against the policy given as the first argument.
'use strict'

const assert = require('node:assert/strict')
const { Policy, Sandbox, Executor } = require('sandgate')

const NOTE = 'hello from the workspace\n'
const COMMAND = 'cat note.txt; cat ../private/secret.txt'

async function main(policyPath) {
  console.log(`node: sandgate from ${require.resolve('sandgate')}`)
  const policy = Policy.load(policyPath)
  const sb = Sandbox.fromPolicy(policy)
  const text = sb.readText('note.txt')
  assert.equal(text, NOTE)
  console.log(`node: read note.txt -> ${JSON.stringify(text)}`)
  try {
    sb.readText('../private/secret.txt')
    throw new Error('node: FAIL: a read outside the workspace succeeded')
  } catch (e) {
    if (!e.code || !e.code.startsWith('E_')) throw e
    console.log(`node: read ../private/secret.txt -> refused ${e.code}`)
  }
  sb.close()
  const ex = new Executor(policy)
  await ex.start()
  const r = await ex.exec(COMMAND)
  await ex.dispose()
  const fs = Boolean(r.confined && r.confined.fs)
  console.log(`node: exec ${JSON.stringify(COMMAND)} -> exit ${r.exitCode}, stdout ${JSON.stringify(r.stdout)}, landlock fs ${fs}`)
  assert.ok(r.stdout.startsWith(NOTE), r.stdout)
  if (fs) {
    assert.ok(!r.stdout.includes('secret') && r.exitCode !== 0, 'the shell read outside its roots')
  }
  console.log('node: ok')
}

main(process.argv[2]).catch((e) => {
  console.error(e)
  process.exit(1)
})
