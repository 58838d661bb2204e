'use strict'
// Fetcher against a loopback HTTP server (node:http on 127.0.0.1, port 0):
// a granted fetch (sync and async), an ungranted port refused with hops,
// the metadata address refused, the net_ops budget, malformed options.

const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const { Worker } = require('node:worker_threads')
const path = require('node:path')

const { Policy, Fetcher } = require('..')

// A proxy in the environment makes restricted mode refuse every fetch.
for (const k of ['HTTPS_PROXY', 'HTTP_PROXY', 'ALL_PROXY', 'https_proxy', 'http_proxy', 'all_proxy']) {
  delete process.env[k]
}

function policyWith(text) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-node-fetch-')))
  fs.writeFileSync(path.join(dir, 'policy.toml'), text)
  try {
    return Policy.load(path.join(dir, 'policy.toml'))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

async function rejectsCode(promise, code) {
  let err
  await assert.rejects(promise, (e) => {
    err = e
    return e instanceof Error && e.code === code
  })
  return err
}

function throwsCode(fn, code) {
  let err
  assert.throws(fn, (e) => {
    err = e
    return e instanceof Error && e.code === code
  })
  return err
}

// The server runs in a worker thread: a synchronous `fetch` blocks this
// thread's event loop, so a server on it could never answer.
const SERVER = `
const http = require('node:http')
const { parentPort } = require('node:worker_threads')
const server = http.createServer((req, res) => {
  const chunks = []
  req.on('data', (c) => chunks.push(c))
  req.on('end', () => {
    const body = Buffer.concat(chunks)
    if (req.url === '/redirect') {
      res.writeHead(302, { Location: 'http://169.254.169.254/latest/meta-data/' })
      res.end()
      return
    }
    if (req.url === '/binary') {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' })
      res.end(Buffer.from([0xff, 0x00, 0xfe]))
      return
    }
    res.setHeader('X-Test', ['a', 'b'])
    res.setHeader('X-Echo-Agent', req.headers['x-agent'] || '')
    res.writeHead(201, { 'Content-Type': 'text/plain' })
    res.end(Buffer.concat([Buffer.from(req.method + ' ' + req.url + ' '), body]))
  })
})
server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port))
parentPort.on('message', () => server.close(() => process.exit(0)))
`

describe('Fetcher', () => {
  let worker
  let port
  const T = { timeoutMs: 10000 }

  before(async () => {
    worker = new Worker(SERVER, { eval: true })
    port = await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
  })

  after(() =>
    new Promise((resolve) => {
      worker.once('exit', resolve)
      worker.postMessage('stop')
    }))

  const granted = () => `[net]\nallow = ["127.0.0.1:${port}"]\nallow_http = true\n`

  test('a granted fetch, sync and async', async () => {
    const f = new Fetcher(policyWith(granted()))
    assert.equal(f.netOpsRemaining, null)
    const r = f.fetch(`http://127.0.0.1:${port}/hello`, T)
    assert.equal(r.status, 201)
    assert.ok(Buffer.isBuffer(r.body))
    assert.equal(r.body.toString(), 'GET /hello ')
    assert.equal(r.truncated, false)
    assert.equal(r.headers['content-type'], 'text/plain')
    assert.equal(r.headers['x-test'], 'a, b')
    assert.equal(r.hops.length, 1)
    assert.equal(r.hops[0].allowed, true)
    assert.equal(r.hops[0].status, 201)
    assert.equal(r.hops[0].rule, `127.0.0.1:${port}`)
    assert.deepEqual(r.hops[0].addresses, ['127.0.0.1'])

    const a = await f.fetchAsync(`http://127.0.0.1:${port}/post`, {
      method: 'POST',
      headers: { 'X-Agent': 'sg' },
      body: 'payload',
      ...T,
    })
    assert.equal(a.status, 201)
    assert.equal(a.body.toString(), 'POST /post payload')
    assert.equal(a.headers['x-echo-agent'], 'sg')

    const b = f.fetch(`http://127.0.0.1:${port}/bin`, { method: 'PUT', body: Buffer.from([1, 2, 3]), ...T })
    assert.equal(b.status, 201)
    assert.deepEqual(b.body, Buffer.from('PUT /bin \x01\x02\x03', 'latin1'))

    const bin = await f.fetchAsync(`http://127.0.0.1:${port}/binary`, T)
    assert.deepEqual(bin.body, Buffer.from([0xff, 0x00, 0xfe]))

    const cut = f.fetch(`http://127.0.0.1:${port}/long`, { maxBytes: 3, ...T })
    assert.equal(cut.body.toString(), 'GET')
    assert.equal(cut.truncated, true)
  })

  test('the audit option reports each fetch, refused ones too, never a secret', async () => {
    const here = `http://127.0.0.1:${port}`
    const events = []
    let f
    const audit = (e) => {
      events.push(e)
      if (events.length === 1) {
        // The callback may call back into its fetcher (reported too).
        assert.throws(() => f.fetch('', T), (err) => err.code === 'E_REQUEST')
      }
    }
    f = new Fetcher(policyWith(granted() + '[budgets]\nnet_ops = 6\n'), { audit })
    const secret = { headers: { Authorization: 'Bearer SECRET1' }, ...T }
    assert.equal(f.fetch(`${here}/p/SECRET2?token=SECRET3`, secret).status, 201)
    throwsCode(() => f.fetch('not a url SECRET4', secret), 'E_REQUEST')
    throwsCode(() => f.fetch(`http://me:SECRET5@127.0.0.1:${port}/`, secret), 'E_REQUEST')
    throwsCode(() => f.fetch('http://not-granted.invalid/?token=SECRET6', secret), 'E_NET_DENIED')
    await rejectsCode(f.fetchAsync(`${here}/redirect`, secret), 'E_NET_DENIED')
    throwsCode(() => f.fetch(`${here}/?token=SECRET8`, { headers: { A: 5 } }), 'E_REQUEST')
    await rejectsCode(f.fetchAsync(`${here}/?token=SECRET9`, { timeoutMs: -1 }), 'E_REQUEST')
    // The nested fetch (run by the first event's callback, at the first
    // await) spent the sixth: the budget is spent; malformed options
    // spend none.
    throwsCode(() => f.fetch(`${here}/?token=SECRET10`, secret), 'E_DENIED')
    // Events arrive on a later turn of the event loop.
    for (let i = 0; i < 100 && events.length < 9; i++) await new Promise((r) => setTimeout(r, 10))
    assert.ok(!JSON.stringify(events).includes('SECRET'), JSON.stringify(events))
    // The nested fetch's event lands among the others: compared as a set.
    const sorted = (xs) => xs.map((x) => JSON.stringify(x)).sort()
    assert.deepEqual(
      sorted(events.map((e) => [e.op, e.path, e.size ?? null, e.outcome])),
      sorted([
        ['fetch', here, 'GET /p/SECRET2?token=SECRET3 '.length, 'OK'],
        ['fetch', '', undefined, 'E_REQUEST'],
        ['fetch', '', undefined, 'E_REQUEST'],
        ['fetch', 'http://not-granted.invalid:80', undefined, 'E_NET_DENIED'],
        ['fetch', '', undefined, 'E_REQUEST'],
        ['fetch', `${here} -> http://169.254.169.254:80`, undefined, 'E_NET_DENIED'],
        ['fetch', here, undefined, 'E_REQUEST'],
        ['fetch', here, undefined, 'E_REQUEST'],
        ['fetch', here, undefined, 'E_DENIED'],
      ].map(([op, p, size, outcome]) => [op, p, size ?? null, outcome])),
    )
    assert.throws(() => new Fetcher(policyWith(granted()), { audit: 5 }), (e) => e.code === 'E_REQUEST')
  })

  test('an ungranted port is refused with hops', async () => {
    const f = new Fetcher(policyWith(granted()))
    const e = throwsCode(() => f.fetch(`http://127.0.0.1:${port + 1 === 65536 ? 1 : port + 1}/`), 'E_NET_DENIED')
    assert.ok(Array.isArray(e.hops))
    assert.equal(e.hops.length, 1)
    assert.equal(e.hops[0].allowed, false)
    assert.equal(typeof e.hops[0].reason, 'string')
    assert.equal(e.hops[0].status, undefined)
    const ea = await rejectsCode(f.fetchAsync('http://127.0.0.1:1/'), 'E_NET_DENIED')
    assert.equal(ea.hops[0].allowed, false)
  })

  test('the metadata address is refused, directly and as a redirect', async () => {
    const f = new Fetcher(policyWith(granted()))
    const e = throwsCode(() => f.fetch('http://169.254.169.254/latest/meta-data/'), 'E_NET_DENIED')
    assert.ok(Array.isArray(e.hops))
    const r = await rejectsCode(f.fetchAsync(`http://127.0.0.1:${port}/redirect`, T), 'E_NET_DENIED')
    assert.equal(r.hops.length, 2)
    assert.equal(r.hops[0].allowed, true)
    assert.equal(r.hops[0].status, 302)
    assert.equal(r.hops[1].allowed, false)
    assert.equal(r.hops[1].url, 'http://169.254.169.254/latest/meta-data/')
  })

  test('the net_ops budget', async () => {
    const f = new Fetcher(policyWith(`${granted()}\n[budgets]\nnet_ops = 2\n`))
    assert.equal(f.netOpsRemaining, 2)
    assert.equal(f.fetch(`http://127.0.0.1:${port}/1`, T).status, 201)
    assert.equal((await f.fetchAsync(`http://127.0.0.1:${port}/2`, T)).status, 201)
    assert.equal(f.netOpsRemaining, 0)
    const e = throwsCode(() => f.fetch(`http://127.0.0.1:${port}/3`), 'E_DENIED')
    assert.deepEqual(e.hops, [])
    await rejectsCode(f.fetchAsync(`http://127.0.0.1:${port}/4`), 'E_DENIED')
  })

  test('malformed options are E_REQUEST and spend no budget', async () => {
    const f = new Fetcher(policyWith(`${granted()}\n[budgets]\nnet_ops = 1\n`))
    const url = `http://127.0.0.1:${port}/`
    throwsCode(() => f.fetch(url, { timeoutMs: 0 }), 'E_REQUEST')
    throwsCode(() => f.fetch(url, { maxBytes: -1 }), 'E_REQUEST')
    throwsCode(() => f.fetch(url, { headers: { a: 1 } }), 'E_REQUEST')
    await rejectsCode(f.fetchAsync(url, { timeoutMs: 1.5 }), 'E_REQUEST')
    assert.equal(f.fetch(url, T).status, 201)
  })

  test('headers the client owns are refused', () => {
    const f = new Fetcher(policyWith(granted()))
    const url = `http://127.0.0.1:${port}/`
    for (const h of ['Host', 'Content-Length', 'Transfer-Encoding', 'Connection']) {
      throwsCode(() => f.fetch(url, { headers: { [h]: 'x' } }), 'E_REQUEST')
    }
    throwsCode(() => f.fetch(url, { method: 'CONNECT' }), 'E_REQUEST')
  })
})
