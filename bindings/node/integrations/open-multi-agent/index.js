'use strict'
// sandgate's confined shell behind open-multi-agent's ShellExecutor seam:
// `start?()`, `exec(command, { cwd, timeoutMs, abortSignal })`, `dispose?()`,
// results `{ stdout, stderr, exitCode }`; and OMA's five file tools over one
// sandgate Sandbox (files.js).

/** The sandgate binding: the installed package, else this repository's. */
function loadSandgate() {
  try {
    return require('sandgate')
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e
    return require('../../index.js')
  }
}

const { Executor, Policy } = loadSandgate()

// Executors whose private TMPDIR must go when the process exits, whether
// or not the host ever calls dispose(). One listener serves them all.
const live = new Set()
let listening = false
function track(ex) {
  live.add(ex)
  if (!listening) {
    listening = true
    process.on('exit', () => {
      for (const e of live) {
        try {
          e.disposeSync()
        } catch {
          // The process is ending; nothing is left to report to.
        }
      }
      live.clear()
    })
  }
}

/** The exit code open-multi-agent expects when a command cannot start. */
const NOT_STARTED = 127

/**
 * A ShellExecutor whose commands run under sandgate: confined to the
 * policy's roots, with its environment filter, limits and timeout.
 *
 * `new SandgateShellExecutor({ write_root: '/srv/app', timeout_ms: 60000 })`
 * takes the policy file's keys (`enabled` defaults to true here: a shell
 * executor is asked for to run commands); `new SandgateShellExecutor(policy)`
 * takes a loaded `Policy`.
 */
class SandgateShellExecutor {
  constructor(policyOrOptions = {}, baseDir) {
    if (policyOrOptions instanceof Policy) {
      this.executor = new Executor(policyOrOptions)
    } else {
      const options = { enabled: true, ...policyOrOptions }
      this.executor = Executor.fromOptions(options, baseDir)
    }
    this.startError = null
  }

  /** Prepares the session. Never rejects: a failure is reported by each exec. */
  async start() {
    track(this.executor)
    try {
      await this.executor.start()
      this.startError = null
    } catch (e) {
      this.startError = e
    }
  }

  /**
   * Runs one command. Never rejects: a command that ran answers its exit
   * code (124 timeout, 130 abort); one refused before it started (a cwd
   * outside the root, exec not granted, a spent budget, confinement the
   * policy requires and the kernel lacks) answers 127 with the reason on
   * stderr.
   */
  async exec(command, options = {}) {
    const { cwd, abortSignal } = options
    const timeoutMs = deadline(options.timeoutMs)
    if (this.startError) return refused(this.startError)
    track(this.executor)
    let r
    try {
      r = await this.executor.exec(command, { cwd, timeoutMs, abortSignal })
    } catch (e) {
      return refused(e)
    }
    let stderr = r.stderr
    const notes = (r.confined && Array.isArray(r.confined.notes) && r.confined.notes) || []
    for (const note of notes) {
      if (note.includes('exec.timeout_ms')) stderr += `${stderr && !stderr.endsWith('\n') ? '\n' : ''}sandgate: ${note}\n`
    }
    return { stdout: r.stdout, stderr, exitCode: r.exitCode }
  }

  /** Ends every running command and removes the private TMPDIR. */
  async dispose() {
    live.delete(this.executor)
    await this.executor.dispose()
  }
}

/**
 * OMA's timeoutMs as sandgate's whole milliseconds. OMA's bash tool passes
 * the model's `timeout`, any number, and LocalShellExecutor gives it to
 * setTimeout; the binding takes a whole number from 1 to 2^53 - 1 and
 * refuses the rest. A fraction is rounded up, zero or less is the shortest
 * deadline (the command times out at once, as setTimeout(0) makes it), and
 * more than 2^53 - 1, Infinity included, is 2^53 - 1 (the policy's
 * `timeout_ms` applies, with its note). Anything else (undefined: the
 * policy's) is left for the binding to judge.
 */
function deadline(ms) {
  if (typeof ms !== 'number' || Number.isNaN(ms)) return ms
  return Math.min(Math.max(1, Math.ceil(ms)), Number.MAX_SAFE_INTEGER)
}

function refused(e) {
  const reason = e && e.message ? e.message : String(e)
  return { stdout: '', stderr: `sandgate: ${reason}\n`, exitCode: NOT_STARTED }
}

const { createSandgateFileTools } = require('./files.js')

module.exports = { SandgateShellExecutor, createSandgateFileTools }
