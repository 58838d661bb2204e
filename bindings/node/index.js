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
module.exports = binding
