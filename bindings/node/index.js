// The entry point of the `sandgate` package: loads the native addon through
// the loader `napi build` generates (binding.js) and, when no addon fits this
// machine, throws an error that names the missing package and how to get it
// (the generated loader's own message blames npm).
'use strict'

// The one platform built and tested: the package that carries its addon.
const PLATFORM_PACKAGES = {
  'linux-x64-gnu': 'sandgate-linux-x64-gnu',
}

function platformKey() {
  let key = `${process.platform}-${process.arch}`
  if (process.platform === 'linux') {
    const report = process.report && typeof process.report.getReport === 'function' ? process.report.getReport() : null
    const glibc = report && report.header && report.header.glibcVersionRuntime
    key += glibc ? '-gnu' : '-musl'
  }
  return key
}

function missingAddon(cause) {
  const key = platformKey()
  const pkg = PLATFORM_PACKAGES[key]
  const { version } = require('./package.json')
  let message
  if (pkg) {
    message =
      `sandgate: the native addon for ${key} is missing: the package ${pkg}@${version} is not installed ` +
      `(npm skips optional dependencies with --omit=optional or --no-optional, and a lock file made on ` +
      `another platform may leave it out). Install it with \`npm install ${pkg}@${version}\`, or build the ` +
      `addon from a source checkout with \`npx napi build --platform --release\` in bindings/node.`
  } else {
    message =
      `sandgate: no native addon for ${key}: sandgate is built and tested for ` +
      `${Object.keys(PLATFORM_PACKAGES).join(', ')} only. Build the addon from a source checkout with ` +
      `\`npx napi build --platform --release\` in bindings/node.`
  }
  const err = new Error(message, { cause })
  err.code = 'ERR_SANDGATE_ADDON_MISSING'
  return err
}

let binding
try {
  binding = require('./binding.js')
} catch (e) {
  throw missingAddon(e)
}

// A command runs on the libuv pool, and Node joins the pool's threads before
// it exits, running no native cleanup hook first: a command in flight would
// hold `process.exit()` until it ended, for as long as the policy's
// `timeout_ms` lets it. So every executor with a command in flight is
// disposed on 'exit' (its commands ended, the private TMPDIR removed), and
// the process exits at once. Only executors running a command are held here,
// and only while it runs.
const running = new Map()
const exec = binding.Executor.prototype.exec
binding.Executor.prototype.exec = function (...args) {
  const promise = exec.apply(this, args)
  running.set(this, (running.get(this) || 0) + 1)
  const settled = () => {
    const n = running.get(this) - 1
    if (n > 0) running.set(this, n)
    else running.delete(this)
  }
  promise.then(settled, settled)
  return promise
}
process.on('exit', () => {
  for (const executor of running.keys()) {
    try {
      executor.disposeSync()
    } catch {
      // Exiting: nothing to report to.
    }
  }
})

module.exports = binding
