'use strict'
// open-multi-agent's five built-in file tools (`file_read`, `file_write`,
// `file_edit`, `glob`, `grep`) answered by one sandgate `Sandbox`: the same
// tool names, input fields and result text as OMA's, so an agent's prompts
// and a host's tests keep working, while every path goes through sandgate's
// name checks and kernel-side resolution beneath the root.
//
// A tool definition is what OMA's `ToolRegistry.register` takes:
// `{ name, description, inputSchema (zod), consequential?, execute(input, context) }`,
// `execute` resolving `{ data: string, isError: boolean }` and never
// rejecting.

const { z } = require('zod')

function loadSandgate() {
  try {
    return require('sandgate')
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e
    return require('../../index.js')
  }
}

const { Policy, Sandbox } = loadSandgate()

/** Directories OMA's glob and grep do not descend into. */
const SKIP_DIRS = new Set(['.git', '.svn', '.hg', 'node_modules', '.next', 'dist', 'build'])

const DEFAULT_MAX_FILES = 500
const DEFAULT_MAX_RESULTS = 100
/** The most matches one sandgate grep answers. */
const GREP_CEILING = 1000
/** The most paths one sandgate glob answers. */
const GLOB_CEILING = 1000

const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`
const reason = (e) => (e && e.message ? e.message : String(e))

/** How many of the audit callback's errors `tools.auditErrors` keeps. */
const MAX_AUDIT_ERRORS = 100

/**
 * The host's audit callback, guarded. The binding calls it on the event
 * loop, where a throw is an uncaught exception that ends the process
 * between two tool calls of a run; guarded, an error is kept in `errors`
 * (the first MAX_AUDIT_ERRORS) and reported as a process warning, and the
 * run goes on.
 */
function guardedAudit(audit, errors) {
  return (event) => {
    try {
      audit(event)
    } catch (e) {
      if (errors.length < MAX_AUDIT_ERRORS) errors.push(e)
      process.emitWarning(`sandgate: the audit callback threw: ${reason(e)}`, 'SandgateAuditWarning')
    }
  }
}

/**
 * The `abortSignal` of OMA's tool context, as the binding's options take
 * it: the run's cancellation stops a glob or grep under way.
 */
function abortOf(context) {
  const signal = context && context.abortSignal
  return signal ? { abortSignal: signal } : {}
}

/** The sandbox the tools share, from a Sandbox, a Policy or policy keys. */
function sandboxFor(source, options, audit) {
  const { baseDir } = options
  if (source instanceof Sandbox) return source
  const fromPolicy = (policy) => Sandbox.fromPolicy(policy, audit ? { audit } : undefined)
  if (source instanceof Policy) return fromPolicy(source)
  // OMA's tools read and write one working directory, and its file_write
  // replaces an existing file: the write root is also the read root unless
  // read roots are given, and the host's half of the overwrite rule is on
  // unless the options say otherwise.
  const defaults = { allow_overwrite: true }
  if (source.read_roots === undefined && source.write_root !== undefined) defaults.read_roots = [source.write_root]
  return fromPolicy(Policy.fromOptions({ ...defaults, ...source }, baseDir))
}

/**
 * The root-relative name of a path an agent gave: an absolute path inside
 * a root (compared component by component) or a root-relative name.
 *
 * `hostName` is no sandbox operation and audits nothing, so a host path
 * outside every root (the plainest escape an agent tries) is reported to
 * `audit` here, as the refused `op` with the path as given, on a later turn
 * of the event loop as the sandbox's own events are.
 */
function nameOf(sandbox, path, write, op, audit) {
  try {
    return sandbox.hostName(path, { write })
  } catch (e) {
    if (audit && e && typeof e.code === 'string') {
      const event = { op, path, time: Date.now(), outcome: e.code }
      setImmediate(() => audit(event))
    }
    throw e
  }
}

/**
 * The root-relative name of a glob or grep base (default the root), in the
 * spelling sandgate answers paths in: `.` and empty components dropped
 * (`./src/`, `src//lib` and `${root}/./src` are `src` and `src/lib`), `.`
 * for the root. The skip filter and the match of a file named directly
 * compare the answered paths with it character by character.
 */
function baseOf(sandbox, path, op, audit) {
  if (path === undefined) return '.'
  const name = nameOf(sandbox, path, false, op, audit)
  // An empty path stays empty, for sandgate to refuse as it does elsewhere.
  if (name === '') return name
  const parts = name.split('/').filter((p) => p !== '' && p !== '.')
  return parts.length === 0 ? '.' : parts.join('/')
}

/** Whether `rel` (root-relative) crosses a skipped directory below `base` (as `baseOf` spells it). */
function skipped(base, rel) {
  const below = base === '.' ? rel : rel.slice(base.length + 1)
  const parts = below.split('/')
  parts.pop()
  return parts.some((p) => SKIP_DIRS.has(p))
}

/**
 * OMA's glob pattern as a sandgate glob below the search directory: a
 * leading `**\/` is dropped as OMA drops it, and a name pattern (no `/`) is
 * matched at every depth.
 */
function globFor(pattern) {
  if (pattern === undefined) return '**/*'
  const p = pattern.startsWith('**/') ? pattern.slice(3) : pattern
  return p.includes('/') ? p : `**/${p}`
}

function makeTools(sandbox, audit) {
  const fileRead = {
    name: 'file_read',
    description:
      'Read a text file and answer its lines numbered from 1, one per line as "N\\t<line>". ' +
      'Give `offset` and `limit` to read a long file a slice at a time.',
    inputSchema: z.object({
      path: z.string().describe('The file: an absolute path inside a granted root, or a name relative to the root.'),
      offset: z.number().int().nonnegative().optional().describe('First line to answer (1-based); default the first.'),
      limit: z.number().int().positive().optional().describe('Most lines to answer; default all from `offset` on.'),
    }),
    async execute(input) {
      let text
      try {
        text = await sandbox.readTextAsync(nameOf(sandbox, input.path, false, 'read', audit))
      } catch (e) {
        return { data: `Could not read file "${input.path}": ${reason(e)}`, isError: true }
      }
      const lines = text.split('\n')
      if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop()
      const total = lines.length
      const start = input.offset !== undefined ? Math.max(0, input.offset - 1) : 0
      if (start >= total && total > 0) {
        return {
          data: `File "${input.path}" has ${plural(total, 'line')} but offset ${input.offset} is beyond the end.`,
          isError: true,
        }
      }
      const end = input.limit !== undefined ? Math.min(start + input.limit, total) : total
      const body = lines
        .slice(start, end)
        .map((line, i) => `${start + i + 1}\t${line}`)
        .join('\n')
      const more = end < total ? `\n\n(showing lines ${start + 1}\u2013${end} of ${total})` : ''
      return { data: body + more, isError: false }
    },
  }

  const fileWrite = {
    name: 'file_write',
    consequential: true,
    description:
      'Write a whole file: create it (and missing parent directories) or replace what it holds. ' +
      'For a change to part of an existing file use file_edit.',
    inputSchema: z.object({
      path: z.string().describe('The file: an absolute path inside the write root, or a name relative to it.'),
      content: z.string().describe('Everything the file is to hold.'),
    }),
    async execute(input) {
      let existed = false
      try {
        const name = nameOf(sandbox, input.path, true, 'write', audit)
        try {
          await sandbox.writeAsync(name, input.content, { overwrite: false })
        } catch (e) {
          if (e.code !== 'E_EXISTS') throw e
          existed = true
          await sandbox.writeAsync(name, input.content, { overwrite: true })
        }
      } catch (e) {
        return { data: `Failed to write file "${input.path}": ${reason(e)}`, isError: true }
      }
      const lines = input.content.split('\n').length
      const bytes = Buffer.byteLength(input.content, 'utf8')
      return {
        data: `${existed ? 'Updated' : 'Created'} "${input.path}" (${plural(lines, 'line')}, ${bytes} bytes).`,
        isError: false,
      }
    },
  }

  const notFound = (path) =>
    `The string to replace was not found in "${path}".\n` +
    'Make sure `old_string` matches the file contents exactly, including indentation and line endings.'

  const fileEdit = {
    name: 'file_edit',
    consequential: true,
    description:
      'Replace an exact string in an existing file. `old_string` must occur exactly once ' +
      'unless `replace_all` is true. To create or rewrite a whole file use file_write.',
    inputSchema: z.object({
      path: z.string().describe('The file: an absolute path inside the write root, or a name relative to it.'),
      old_string: z.string().describe('The text to replace, character for character (whitespace and line ends too).'),
      new_string: z.string().describe('The text to put in its place.'),
      replace_all: z.boolean().optional().describe('Replace every occurrence instead of exactly one (default false).'),
    }),
    async execute(input) {
      const all = input.replace_all ?? false
      let count
      try {
        const name = nameOf(sandbox, input.path, true, 'edit', audit)
        if (input.old_string === '') {
          // sandgate refuses an empty search string as a bad request; OMA
          // finds it nowhere. The file is still looked at first, so a
          // missing or refused file answers as such.
          await sandbox.statAsync(name)
          return { data: notFound(input.path), isError: true }
        }
        count = await sandbox.editAsync(name, input.old_string, input.new_string, { all })
      } catch (e) {
        if (e.code === 'E_EDIT_NO_MATCH') return { data: notFound(input.path), isError: true }
        if (e.code === 'E_EDIT_AMBIGUOUS') {
          const m = /occurs (\d+) times/.exec(reason(e))
          const times = m ? `${m[1]} times` : 'more than once'
          return {
            data:
              `\`old_string\` appears ${times} in "${input.path}". Give a longer string that occurs ` +
              'once, or set `replace_all: true` to replace every occurrence.',
            isError: true,
          }
        }
        const verb = ['E_NOT_FOUND', 'E_NOT_FILE', 'E_TOO_LARGE'].includes(e.code) ? 'Could not read' : 'Failed to write'
        return { data: `${verb} "${input.path}": ${reason(e)}`, isError: true }
      }
      return { data: `Replaced ${plural(count, 'occurrence')} in "${input.path}".`, isError: false }
    },
  }

  const glob = {
    name: 'glob',
    description:
      'List the paths below a directory that match a glob, without reading them (use grep to search ' +
      'inside files). node_modules, .git, dist, build and similar directories are skipped. Paths are ' +
      'relative to the root; the list is capped by `maxFiles`.',
    inputSchema: z.object({
      path: z.string().optional().describe('Directory (or file) to list below; default the root.'),
      pattern: z.string().optional().describe('Glob such as "*.ts" or "**/*.json"; default every path.'),
      maxFiles: z.number().int().positive().optional().describe(`Most paths to answer (default ${DEFAULT_MAX_FILES}).`),
    }),
    async execute(input, context) {
      const shown = input.path ?? '.'
      const maxFiles = input.maxFiles ?? DEFAULT_MAX_FILES
      // The run's cancellation stops the walk (E_ABORTED).
      const stop = abortOf(context)
      let found
      // Whether sandgate's own cap may have cut the listing (before the skip filter).
      let full = false
      try {
        const base = baseOf(sandbox, input.path, 'glob', audit)
        const info = base === '.' ? null : await sandbox.statAsync(base)
        if (info && info.kind !== 'dir') {
          // A file named directly: answered when its name matches.
          const matched = input.pattern === undefined || (await sandbox.globAsync(globFor(input.pattern), parentOf(base), stop)).includes(base)
          found = matched ? [base] : []
        } else {
          const all = await sandbox.globAsync(globFor(input.pattern), base, stop)
          full = all.length >= GLOB_CEILING
          found = all.filter((p) => !skipped(base, p))
        }
      } catch (e) {
        return { data: `Cannot access path "${shown}": ${reason(e)}`, isError: true }
      }
      // A listing sandgate cut is noted even when what is left fits maxFiles
      // (or is empty: paths inside skipped directories may have filled it).
      const ceiling = full
        ? `\n\n(listing capped at ${GLOB_CEILING} paths, the most one search answers` +
          (found.length < GLOB_CEILING ? ', some inside skipped directories' : '') +
          '; give a narrower path or pattern for more)'
        : ''
      if (found.length === 0) return { data: `No files matched.${ceiling}`, isError: false }
      const truncated = found.length > maxFiles
      const listed = found.sort((a, b) => a.localeCompare(b)).slice(0, maxFiles)
      const note = truncated ? `\n\n(listing capped at ${maxFiles} paths; raise maxFiles for more)` : ceiling
      return { data: listed.join('\n') + note, isError: false }
    },
  }

  const grep = {
    name: 'grep',
    description:
      'Search files for a regular expression and answer each matching line as "path:line:text" ' +
      '(paths relative to the root, lines from 1). `glob` limits the files searched (e.g. "*.ts"); ' +
      'use the glob tool to list paths without reading. Capped by `maxResults`.',
    inputSchema: z.object({
      pattern: z.string().describe('Regular expression to look for in file contents.'),
      path: z.string().optional().describe('Directory or file to search; default the root.'),
      glob: z.string().optional().describe('Only files matching this glob (e.g. "*.ts", "**/*.json").'),
      maxResults: z.number().int().positive().optional().describe(`Most matching lines to answer (default ${DEFAULT_MAX_RESULTS}).`),
    }),
    async execute(input, context) {
      const invalid = { data: `Invalid regular expression: "${input.pattern}"`, isError: true }
      try {
        new RegExp(input.pattern)
      } catch {
        return invalid
      }
      const shown = input.path ?? '.'
      const maxResults = input.maxResults ?? DEFAULT_MAX_RESULTS
      const want = Math.min(maxResults, GREP_CEILING)
      let matches
      // Whether sandgate's own cap may have cut the search (before the skip filter).
      let full = false
      try {
        const base = baseOf(sandbox, input.path, 'grep', audit)
        // The run's cancellation stops the search (E_ABORTED).
        const options = { ...abortOf(context), ...(input.glob !== undefined ? { glob: input.glob } : {}) }
        let all = await sandbox.grepAsync(input.pattern, base, want, options)
        matches = all.filter((m) => !skipped(base, m.path))
        if (matches.length < want && all.length >= want && want < GREP_CEILING) {
          // Matches inside skipped directories filled the cap, and matches
          // outside them may not have been reached: ask for as many as
          // sandgate answers and keep the first `want` outside.
          all = await sandbox.grepAsync(input.pattern, base, GREP_CEILING, options)
          matches = all.filter((m) => !skipped(base, m.path))
        }
        full = all.length >= GREP_CEILING
      } catch (e) {
        if (e.code === 'E_REQUEST' && /regular expression|regex/i.test(reason(e))) return invalid
        return { data: `Cannot access path "${shown}": ${reason(e)}`, isError: true }
      }
      // Fewer than asked although sandgate's cap was reached: the rest of
      // its answer lay inside skipped directories, and more may lie beyond.
      const ceiling =
        full && matches.length < want
          ? `\n\n(results capped at ${GREP_CEILING} matches, the most one search answers, some inside ` +
            'skipped directories; give a narrower path or glob for more)'
          : ''
      if (matches.length === 0) return { data: `No matches found.${ceiling}`, isError: false }
      const body = matches
        .slice(0, want)
        .map((m) => `${m.path}:${m.line}:${m.text}`)
        .join('\n')
      const note =
        matches.length >= want ? `\n\n(results capped at ${maxResults}; use maxResults to raise the limit)` : ceiling
      return { data: body + note, isError: false }
    },
  }

  return [fileRead, fileWrite, fileEdit, glob, grep]
}

function parentOf(rel) {
  const i = rel.replace(/\/$/, '').lastIndexOf('/')
  return i < 0 ? '.' : rel.slice(0, i)
}

/**
 * OMA's five file tools over one sandgate `Sandbox`, shared by all five so
 * its `fs_ops` budget and its audit callback span the whole run.
 *
 * `source` is the policy file's keys as an object (`write_root`,
 * `read_roots`, `max_read_bytes`, `deny_write`, ...; `allow_overwrite`
 * defaults to true here), a loaded `Policy`, or a `Sandbox` the host built.
 * `options.audit` receives every operation's AuditEvent (an error it throws
 * is kept in the returned array's `auditErrors` and reported as a process
 * warning, never an uncaught exception); `options.baseDir` resolves
 * relative roots in `source`. The returned array carries the sandbox as its
 * `sandbox` property (to read the budget or close it).
 */
function createSandgateFileTools(source = {}, options = {}) {
  const auditErrors = []
  // A Sandbox the host built keeps its own callback; options.audit is for
  // the sandbox built here.
  const audit = options.audit && !(source instanceof Sandbox) ? guardedAudit(options.audit, auditErrors) : undefined
  const sandbox = sandboxFor(source, options, audit)
  const tools = makeTools(sandbox, audit)
  Object.defineProperty(tools, 'sandbox', { value: sandbox, enumerable: false })
  Object.defineProperty(tools, 'auditErrors', { value: auditErrors, enumerable: false })
  return tools
}

module.exports = { createSandgateFileTools }
