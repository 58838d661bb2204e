// `sandgate mcp` driven by the official MCP TypeScript SDK over stdio: every
// tool, refusals as isError results naming the code, protocol errors as
// rejected calls, nothing outside the root read or changed.
// SANDGATE_BIN names the binary under test.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';

const SECRET = 'TOP-SECRET-OUTSIDE';

function build() {
  const tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sg-mcp-ts-')));
  const app = path.join(tmp, 'srv/app');
  const sec = path.join(tmp, 'srv/app-secrets');
  fs.mkdirSync(path.join(app, 'src'), { recursive: true });
  fs.mkdirSync(path.join(app, '.git'));
  fs.mkdirSync(sec, { recursive: true });
  fs.writeFileSync(path.join(sec, 'key'), SECRET + '\n');
  fs.writeFileSync(path.join(app, 'a.txt'), 'one\ntwo\nthree\n');
  fs.writeFileSync(path.join(app, 'src/lib.rs'), 'fn alpha() {}\n');
  fs.writeFileSync(path.join(app, 'pic.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  fs.writeFileSync(path.join(app, '.git/config'), '[core]\n');
  fs.symlinkSync('../app-secrets', path.join(app, 'out'));
  fs.linkSync(path.join(sec, 'key'), path.join(app, 'hard'));
  fs.writeFileSync(
    path.join(tmp, 'policy.toml'),
    'security_mode = "restricted"\n\n[fs]\nread_roots = ["srv/app"]\nwrite_root = "srv/app"\nallow_overwrite = true\n',
  );
  return { tmp, app, sec };
}

// With `roots`, the client offers those directories as its roots.
async function connect(tmp, args, roots) {
  const transport = new StdioClientTransport({
    command: process.env.SANDGATE_BIN,
    args: args ?? ['mcp', '--policy', path.join(tmp, 'policy.toml')],
    cwd: tmp,
    stderr: 'inherit',
  });
  const options = roots ? { capabilities: { roots: { listChanged: true } } } : undefined;
  const client = new Client({ name: 'sandgate-ts-test', version: '1.0.0' }, options);
  if (roots) {
    client.setRequestHandler(ListRootsRequestSchema, async () => ({
      roots: roots.map((r) => ({ uri: pathToFileURL(r).href })),
    }));
  }
  await client.connect(transport);
  return client;
}

const textOf = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function ok(c, name, args) {
  const r = await c.callTool({ name, arguments: args });
  assert.ok(!r.isError, `${name} ${JSON.stringify(args)}: ${textOf(r)}`);
  return textOf(r);
}

async function refused(c, name, args, code) {
  const r = await c.callTool({ name, arguments: args });
  const t = textOf(r);
  assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} should be refused: ${t}`);
  assert.ok(t.startsWith(code), `${name}: want ${code}, got ${t}`);
  assert.ok(!t.includes(SECRET) && !t.includes('app-secrets'), t);
}

function outsideUnchanged(sec) {
  assert.deepEqual(fs.readdirSync(sec), ['key']);
  assert.equal(fs.readFileSync(path.join(sec, 'key'), 'utf8'), SECRET + '\n');
}

test('every tool through the TypeScript SDK', async () => {
  const { tmp, app, sec } = build();
  const c = await connect(tmp);
  try {
    const { tools } = await c.listTools();
    assert.equal(tools.length, 14);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object');
      assert.equal(typeof t.annotations.readOnlyHint, 'boolean');
    }
    assert.equal(await ok(c, 'read_text_file', { path: path.join(app, 'a.txt'), tail: 2 }), 'two\nthree\n');
    const media = await c.callTool({ name: 'read_media_file', arguments: { path: 'pic.png' } });
    assert.equal(media.content[0].type, 'image');
    assert.match(await ok(c, 'read_multiple_files', { paths: ['a.txt', 'nope'] }), /nope: Error - E_NOT_FOUND/);
    await ok(c, 'write_file', { path: 'w.txt', content: 'w\n' });
    assert.match(
      await ok(c, 'edit_file', { path: 'w.txt', edits: [{ oldText: 'w', newText: 'v' }], dryRun: true }),
      /-w\n\+v/,
    );
    await ok(c, 'edit_file', { path: 'w.txt', edits: [{ oldText: 'w', newText: 'v' }] });
    assert.equal(fs.readFileSync(path.join(app, 'w.txt'), 'utf8'), 'v\n');
    await ok(c, 'create_directory', { path: 'x/y' });
    assert.match(await ok(c, 'list_directory', { path: '.' }), /\[DIR\] x/);
    assert.match(await ok(c, 'list_directory_with_sizes', { path: '.', sortBy: 'name' }), /Combined size/);
    assert.match(await ok(c, 'directory_tree', { path: 'src' }), /"lib.rs"/);
    await ok(c, 'move_file', { source: 'w.txt', destination: 'x/w.txt' });
    assert.equal(await ok(c, 'search_files', { path: '.', pattern: '**/w.txt' }), 'x/w.txt');
    assert.match(await ok(c, 'get_file_info', { path: 'x' }), /type: directory/);
    assert.match(await ok(c, 'list_allowed_directories', {}), new RegExp(app));
    assert.equal((await ok(c, 'grep', { pattern: 'alpha', mode: 'count' })).trim(), 'src/lib.rs:1');

    await refused(c, 'read_text_file', { path: 'out/key' }, 'E_PATH_ESCAPE');
    await refused(c, 'read_text_file', { path: path.join(tmp, 'srv/app-secrets/key') }, 'E_PATH_ESCAPE');
    await refused(c, 'read_text_file', { path: `${app}/../app-secrets/key` }, 'E_PATH_INVALID');
    await refused(c, 'edit_file', { path: 'hard', edits: [{ oldText: 'TOP', newText: 'x' }], dryRun: true }, 'E_HARDLINK');
    await refused(c, 'write_file', { path: '.GIT/config', content: 'x' }, 'E_FS_PROTECTED');
    await assert.rejects(c.callTool({ name: 'no_such_tool', arguments: {} }));
    await assert.rejects(c.callTool({ name: 'write_file', arguments: { path: 'a.txt' } }));
    await c.ping();
  } finally {
    await c.close();
  }
  outsideUnchanged(sec);
});

test('the reference form: sandgate mcp DIR', async () => {
  const { tmp, app, sec } = build();
  const c = await connect(tmp, ['mcp', app]);
  try {
    await ok(c, 'write_file', { path: path.join(app, 'd.txt'), content: 'd' });
    await refused(c, 'write_file', { path: '.git/config', content: 'x' }, 'E_FS_PROTECTED');
    await refused(c, 'list_directory', { path: path.join(tmp, 'srv/app-secrets') }, 'E_PATH_ESCAPE');
  } finally {
    await c.close();
  }
  assert.equal(fs.readFileSync(path.join(app, 'd.txt'), 'utf8'), 'd');
  outsideUnchanged(sec);
});

test("a client's roots hold for where a name leads", async () => {
  const { tmp, app, sec } = build();
  fs.symlinkSync('..', path.join(app, 'src/up'));
  fs.symlinkSync('lib.rs', path.join(app, 'src/lib_link'));
  const c = await connect(tmp, undefined, [path.join(app, 'src')]);
  try {
    assert.match(await ok(c, 'read_text_file', { path: 'src/lib_link' }), /alpha/);
    await refused(c, 'read_text_file', { path: 'a.txt' }, 'E_DENIED');
    await refused(c, 'read_text_file', { path: 'src/up/a.txt' }, 'E_DENIED');
    await refused(c, 'read_text_file', { path: path.join(app, 'src/up/a.txt') }, 'E_DENIED');
    await refused(c, 'list_directory', { path: 'src/up' }, 'E_DENIED');
    await refused(c, 'write_file', { path: 'src/up/new.txt', content: 'x' }, 'E_DENIED');
  } finally {
    await c.close();
  }
  assert.ok(!fs.existsSync(path.join(app, 'new.txt')));
  outsideUnchanged(sec);
});

test('streamable HTTP with the bearer token', async () => {
  const { tmp, app, sec } = build();
  const tokenFile = path.join(tmp, 'token');
  const proc = spawn(
    process.env.SANDGATE_BIN,
    ['mcp', '--policy', path.join(tmp, 'policy.toml'), '--http', '127.0.0.1:0', '--token-file', tokenFile],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  try {
    const url = await new Promise((resolve, reject) => {
      let err = '';
      proc.stderr.on('data', (d) => {
        err += d;
        // Only a whole line: the address may arrive in pieces.
        const m = err.match(/serving MCP on (http:\/\/\S+\/) /);
        if (m) resolve(m[1]);
      });
      proc.on('exit', () => reject(new Error(`server exited: ${err}`)));
    });
    assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600);
    const token = fs.readFileSync(tokenFile, 'utf8');
    const c = new Client({ name: 'sandgate-ts-http', version: '1.0.0' });
    await c.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    try {
      assert.equal(await ok(c, 'read_text_file', { path: 'a.txt', head: 1 }), 'one\n');
      await ok(c, 'write_file', { path: 'h.txt', content: 'h' });
      await refused(c, 'read_text_file', { path: path.join(tmp, 'srv/app-secrets/key') }, 'E_PATH_ESCAPE');
    } finally {
      await c.close();
    }
    assert.equal(fs.readFileSync(path.join(app, 'h.txt'), 'utf8'), 'h');
    // Without the token the client cannot even initialize.
    const anon = new Client({ name: 'anon', version: '1.0.0' });
    await assert.rejects(anon.connect(new StreamableHTTPClientTransport(new URL(url))));
  } finally {
    proc.kill();
  }
  outsideUnchanged(sec);
});
