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

// When the platform package is installed but its addon does not load (a
// glibc older than the addon was linked against, a damaged file), what the
// loader said and the package's version; null when it is not installed.
function platformLoadFailure(pkg) {
  let manifest
  try {
    manifest = require.resolve(`${pkg}/package.json`)
  } catch {
    return null
  }
  let installed = '?'
  try {
    installed = require(manifest).version
  } catch {}
  try {
    require(pkg)
    return { installed, error: null }
  } catch (error) {
    return { installed, error }
  }
}

function missingAddon(cause) {
  const key = platformKey()
  const pkg = PLATFORM_PACKAGES[key]
  const { version } = require('./package.json')
  const failure = pkg ? platformLoadFailure(pkg) : null
  let message
  let code = 'ERR_SANDGATE_ADDON_MISSING'
  if (failure && failure.error) {
    code = 'ERR_SANDGATE_ADDON_LOAD'
    const reason = String(failure.error.message).split('\n')[0]
    const glibc = /version [`']GLIBC_([0-9.]+)' not found/.exec(reason)
    message =
      `sandgate: the native addon for ${key} (the package ${pkg}@${failure.installed}) is installed but ` +
      `failed to load: ${reason}.` +
      (glibc
        ? ` This machine's glibc is older than the addon needs (glibc ${glibc[1]} or later): use a newer ` +
          `system, or build the addon on this one from a source checkout with ` +
          `\`npx napi build --platform --release\` in bindings/node.`
        : '')
    cause = failure.error
  } else if (failure && failure.installed !== version) {
    message =
      `sandgate: the native addon for ${key} does not match: the package ${pkg} is installed at ` +
      `${failure.installed}, and this sandgate is ${version}. Install it with \`npm install ${pkg}@${version}\`.`
  } else if (pkg) {
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
  err.code = code
  return err
}

let binding
try {
  binding = require('./binding.js')
} catch (e) {
  throw missingAddon(e)
}

// A command runs on a thread of the addon's own, which Node does not wait
// for: on 'exit' every executor with a command in flight is disposed (its
// commands and everything they started ended, the private TMPDIR removed),
// so that no command runs on past the process that asked for it. Only
// executors running a command are held here, and only while it runs.
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

// The other calls on the pool (`fetchAsync`, the sandbox's ranged reads and
// searches) would hold the exit the same way, a fetch for as long as its
// timeout. Each is given an abort of its own, passed on from the caller's
// `abortSignal` while the call runs, and every one still in flight is
// aborted on 'exit': it ends within about 50 ms, and the process with it.
const inFlight = new Set()
function abortOnExit(cls, method, at) {
  const call = cls.prototype[method]
  cls.prototype[method] = function (...args) {
    const options = args[at]
    const given = options == null ? undefined : options.abortSignal
    // Options that are not an object, or a signal that is not one or has
    // already fired, go as they are: the call refuses or aborts them itself.
    if (
      (options != null && typeof options !== 'object') ||
      (given != null && !(given instanceof AbortSignal && !given.aborted))
    ) {
      return call.apply(this, args)
    }
    const own = new AbortController()
    const pass = () => own.abort()
    // The caller's signal is listened to before the call is made: a
    // signal whose `addEventListener` throws throws here, before anything
    // runs. (Added after the call, the throw left the operation running
    // with nobody holding its Promise, whose rejection was then unhandled
    // and ended the process.)
    if (given) given.addEventListener('abort', pass, { once: true })
    let promise
    try {
      args[at] = { ...options, abortSignal: own.signal }
      promise = call.apply(this, args)
    } catch (e) {
      if (given) unlisten(given, pass)
      throw e
    }
    inFlight.add(own)
    const settled = () => {
      inFlight.delete(own)
      if (given) unlisten(given, pass)
    }
    promise.then(settled, settled)
    return promise
  }
}

// Removes `pass` from the caller's signal. One whose `removeEventListener`
// throws keeps it (aborting only a call that has ended, it does nothing):
// thrown from the call's completion, the exception would be an unhandled
// rejection that ends the process.
function unlisten(signal, pass) {
  try {
    signal.removeEventListener('abort', pass)
  } catch {}
}
abortOnExit(binding.Fetcher, 'fetchAsync', 1)
abortOnExit(binding.Sandbox, 'readLinesAsync', 3)
abortOnExit(binding.Sandbox, 'globAsync', 2)
abortOnExit(binding.Sandbox, 'globFoundAsync', 2)
abortOnExit(binding.Sandbox, 'grepFoundAsync', 3)
abortOnExit(binding.Sandbox, 'grepAsync', 3)

// On the main thread, the executors of every worker thread too. A worker's
// commands also end with the worker's environment (the addon's teardown
// hook), which Node tears down as it stops the worker: this ends them
// before then.
const { isMainThread } = require('node:worker_threads')
process.on('exit', () => {
  for (const executor of running.keys()) {
    try {
      executor.disposeSync()
    } catch {
      // Exiting: nothing to report to.
    }
  }
  if (isMainThread) {
    try {
      binding.Executor.disposeRunning()
    } catch {}
  }
  for (const own of inFlight) own.abort()
})

module.exports = binding
