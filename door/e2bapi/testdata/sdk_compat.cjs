// Drives the official e2b SDK (installed in E2B_SDK_DIR) against an
// agent-runner serve whose E2B-compatible API E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY name. Each step prints "ok <step>:
// <result>" or "FAIL <step>: <error>"; the script exits 1 if any failed.
// Steps for what the server does not support yet check that the SDK gets
// a clear "not supported" error instead.
const { createRequire } = require('node:module')
const sdk = createRequire(process.env.E2B_SDK_DIR + '/')('e2b')
const { Sandbox, CommandExitError } = sdk

let failed = 0
async function step(name, fn) {
  try {
    const got = await fn()
    const shown = got instanceof Sandbox ? got.sandboxId : got
    console.log(`ok ${name}: ${JSON.stringify(shown)}`)
    return got
  } catch (err) {
    failed++
    console.log(`FAIL ${name}: ${err && err.stack ? err.stack : err}`)
  }
}
function expect(cond, what) {
  if (!cond) throw new Error(`expected ${what}`)
}
// unsupported expects fn to fail with the server's "not supported" error.
async function unsupported(fn) {
  try {
    await fn()
  } catch (err) {
    expect(/not supported/.test(String(err.message)), `a "not supported" error, got ${err.message}`)
    return err.message
  }
  throw new Error('expected a "not supported" error, the call succeeded')
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function main() {
  const tag = `compat-${process.pid}`
  const sbx = await step('Sandbox.create', async () => {
    const s = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 120_000 })
    expect(s.sandboxId, 'a sandbox id')
    return s
  })
  if (!sbx) process.exit(1)
  console.log(`sandbox ${sbx.sandboxId}`)
  await step('Sandbox.list', async () => {
    const page = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
    expect(page.length === 1 && page[0].sandboxId === sbx.sandboxId, `one sandbox ${sbx.sandboxId}, got ${JSON.stringify(page)}`)
    expect(page[0].metadata.suite === tag, 'its metadata')
    return page.map((s) => [s.sandboxId, s.state, s.templateId])
  })
  await step('getInfo', async () => {
    const info = await sbx.getInfo()
    expect(info.state === 'running', 'running')
    return { state: info.state, envdVersion: info.envdVersion }
  })
  await step('isRunning', async () => {
    expect(await sbx.isRunning(), 'running')
    return true
  })
  await step('commands.run foreground', async () => {
    const r = await sbx.commands.run('echo hello; echo err >&2')
    expect(r.exitCode === 0 && r.stdout === 'hello\n' && r.stderr === 'err\n', `hello and err, got ${JSON.stringify(r)}`)
    return r
  })
  await step('commands.run non-zero exit raises CommandExitError', async () => {
    try {
      await sbx.commands.run('echo bad >&2; exit 3')
    } catch (err) {
      expect(err instanceof CommandExitError, `a CommandExitError, got ${err}`)
      expect(err.exitCode === 3 && err.stderr === 'bad\n', `exit 3 and bad, got ${err.exitCode} ${JSON.stringify(err.stderr)}`)
      return { exitCode: err.exitCode, error: err.error }
    }
    throw new Error('no error')
  })
  await step('commands.run with envs and cwd', async () => {
    await sbx.files.write('sub/dir/keep.txt', 'x')
    const r = await sbx.commands.run('echo $GREETING; pwd', { envs: { GREETING: 'hi' }, cwd: '/home/user/sub' })
    expect(r.stdout.startsWith('hi\n') && r.stdout.trim().endsWith('/sub'), `hi and the cwd, got ${JSON.stringify(r.stdout)}`)
    return r.stdout
  })
  await step('background with onStdout streaming and wait', async () => {
    const seen = []
    const h = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.2; done', {
      background: true,
      onStdout: (d) => seen.push(d),
    })
    expect(h.pid > 0, 'a pid')
    const r = await h.wait()
    const all = seen.join('')
    expect(r.exitCode === 0 && all === 'line1\nline2\nline3\n', `three lines, got ${JSON.stringify(all)}`)
    return { pid: h.pid, chunks: seen.length, stdout: r.stdout }
  })
  await step('commands.list shows a running process', async () => {
    const h = await sbx.commands.run('sleep 30', { background: true })
    const list = await sbx.commands.list()
    expect(list.some((p) => p.pid === h.pid), `pid ${h.pid} in ${JSON.stringify(list)}`)
    expect(await h.kill(), 'kill true')
    return list.map((p) => [p.pid, p.cmd])
  })
  await step('sendStdin + closeStdin', async () => {
    const h = await sbx.commands.run('cat', { background: true, stdin: true })
    await h.sendStdin('from stdin\n')
    await h.closeStdin()
    const r = await h.wait()
    expect(r.stdout === 'from stdin\n', `the input back, got ${JSON.stringify(r.stdout)}`)
    return r.stdout
  })
  await step('commands.connect to a running process', async () => {
    const h = await sbx.commands.run('sleep 0.5; echo late', { background: true })
    const seen = []
    const c = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) })
    const r = await c.wait()
    expect(r.exitCode === 0 && seen.join('') === 'late\n', `late, got ${JSON.stringify(seen)}`)
    return seen.join('')
  })
  await step('kill a background process', async () => {
    const h = await sbx.commands.run('sleep 60', { background: true })
    expect(await sbx.commands.kill(h.pid), 'kill true')
    try {
      await h.wait()
    } catch (err) {
      expect(err instanceof CommandExitError, `a CommandExitError, got ${err}`)
      return { exitCode: err.exitCode, error: err.error }
    }
    throw new Error('a killed process ended well')
  })
  await step('commands.run timeoutMs kills the command', async () => {
    const start = Date.now()
    try {
      await sbx.commands.run('sleep 30', { timeoutMs: 1000 })
    } catch (err) {
      expect(Date.now() - start < 15000, 'the timeout to end it')
      return err.name
    }
    throw new Error('no timeout')
  })
  await step('files.write/read text', async () => {
    const info = await sbx.files.write('/home/user/hello.txt', 'hello file')
    const got = await sbx.files.read('/home/user/hello.txt')
    expect(got === 'hello file', `the text back, got ${JSON.stringify(got)}`)
    const viaCmd = await sbx.commands.run(`cat ${info.path}`)
    expect(viaCmd.stdout === 'hello file', `the command to see it at ${info.path}`)
    return info
  })
  await step('files.write/read bytes (octet-stream)', async () => {
    const data = new Uint8Array([0, 1, 2, 250, 255])
    await sbx.files.write('bin/data.bin', data, { useOctetStream: true })
    const got = await sbx.files.read('bin/data.bin', { format: 'bytes' })
    expect(Buffer.from(got).equals(Buffer.from(data)), `the bytes back, got ${got}`)
    return Array.from(got)
  })
  await step('files.write many', async () => {
    const infos = await sbx.files.write([{ path: 'm/a.txt', data: 'A' }, { path: 'm/b.txt', data: 'B' }])
    const r = await sbx.commands.run('cat m/a.txt m/b.txt')
    expect(r.stdout === 'AB', `AB, got ${JSON.stringify(r.stdout)}`)
    return infos.map((i) => i.path)
  })
  await step('files.read missing raises FileNotFoundError', async () => {
    try {
      await sbx.files.read('nope.txt')
    } catch (err) {
      expect(err.name === 'FileNotFoundError' || err.constructor.name === 'FileNotFoundError', `FileNotFoundError, got ${err.name}: ${err.message}`)
      return err.name
    }
    throw new Error('no error')
  })
  await step('files.read outside the workspace is refused', async () => {
    try {
      await sbx.files.read('/etc/passwd')
    } catch (err) {
      return err.message
    }
    throw new Error('read /etc/passwd')
  })
  await step('files.exists', async () => {
    expect(await sbx.files.exists('/home/user/hello.txt'), 'hello.txt to exist')
    expect(!(await sbx.files.exists('nope.txt')), 'nope.txt not to exist')
    return true
  })
  await step('files.getInfo', async () => {
    const info = await sbx.files.getInfo('hello.txt')
    expect(info.type === 'file' && info.size === 10 && info.name === 'hello.txt', `a 10-byte file, got ${JSON.stringify(info)}`)
    return { name: info.name, type: info.type, size: info.size, permissions: info.permissions }
  })
  await step('files.makeDir', async () => {
    expect(await sbx.files.makeDir('/home/user/newdir/inner'), 'created')
    expect(!(await sbx.files.makeDir('newdir/inner')), 'false when it exists')
    return true
  })
  await step('files.rename', async () => {
    const info = await sbx.files.rename('hello.txt', 'newdir/moved.txt')
    expect(info.path === '/workspace/newdir/moved.txt', `the new path, got ${info.path}`)
    expect(!(await sbx.files.exists('hello.txt')), 'the old name gone')
    return info.path
  })
  await step('files.list', async () => {
    const entries = await sbx.files.list('/home/user/newdir')
    const names = entries.map((e) => `${e.name}:${e.type}`).sort()
    expect(JSON.stringify(names) === JSON.stringify(['inner:dir', 'moved.txt:file']), `inner and moved.txt, got ${names}`)
    const deep = await sbx.files.list('newdir', { depth: 2 })
    expect(deep.length === 2, `two entries at depth 2, got ${deep.length}`)
    return names
  })
  await step('files.remove', async () => {
    await sbx.files.remove('newdir')
    expect(!(await sbx.files.exists('newdir/moved.txt')), 'newdir gone')
    return true
  })
  await step('files.watchDir', async () => {
    await sbx.files.makeDir('watched')
    const seen = []
    const handle = await sbx.files.watchDir('/home/user/watched', (e) => seen.push(`${e.type}:${e.name}`), { recursive: true })
    await sbx.files.write('watched/new.txt', 'x')
    await sbx.commands.run('mkdir watched/sub && sleep 0.2 && echo y > watched/sub/deep.txt && rm watched/new.txt')
    for (let i = 0; i < 50 && !seen.includes('remove:new.txt'); i++) await sleep(100)
    await handle.stop()
    for (const want of ['create:new.txt', 'create:sub', 'create:sub/deep.txt', 'remove:new.txt']) {
      expect(seen.includes(want), `${want} in ${JSON.stringify(seen)}`)
    }
    return seen
  })
  await step('pty.create/sendInput/resize/kill', async () => {
    let out = ''
    const dec = new TextDecoder()
    const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (out += dec.decode(d)) })
    await sbx.pty.sendInput(h.pid, new TextEncoder().encode('echo pty-$((6*7))\n'))
    for (let i = 0; i < 50 && !out.includes('pty-42'); i++) await sleep(100)
    expect(out.includes('pty-42'), `pty-42 in the terminal, got ${JSON.stringify(out)}`)
    await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
    expect(await sbx.pty.kill(h.pid), 'kill true')
    return out.length
  })
  await step('setTimeout', async () => {
    await sbx.setTimeout(300_000)
    const info = await sbx.getInfo()
    const left = info.endAt.getTime() - Date.now()
    expect(left > 250_000 && left <= 301_000, `about 300 s left, got ${left} ms`)
    return left
  })
  await step('pause and connect (resume)', async () => {
    expect(await sbx.pause(), 'paused')
    const info = await sbx.getInfo()
    expect(info.state === 'paused', `paused, got ${info.state}`)
    const again = await Sandbox.connect(sbx.sandboxId)
    const r = await again.commands.run('echo back')
    expect(r.stdout === 'back\n', 'a command after the resume')
    return info.state
  })
  // waitPaused polls getInfo until the sandbox is paused (the reaper
  // runs every second), within limitMs.
  async function waitPaused(s, limitMs) {
    const until = Date.now() + limitMs
    for (;;) {
      const info = await s.getInfo()
      if (info.state === 'paused') return info
      expect(Date.now() < until, `paused within ${limitMs} ms, still ${info.state}`)
      await sleep(250)
    }
  }
  await step('lifecycle onTimeout pause: paused at the timeout, connect resumes it', async () => {
    const p = await Sandbox.create({ timeoutMs: 3_000, lifecycle: { onTimeout: 'pause' } })
    try {
      await p.files.write('kept.txt', 'kept')
      const info = await waitPaused(p, 20_000)
      expect(info.lifecycle && info.lifecycle.onTimeout === 'pause', `lifecycle onTimeout pause, got ${JSON.stringify(info.lifecycle)}`)
      const again = await Sandbox.connect(p.sandboxId, { timeoutMs: 60_000 })
      const r = await again.commands.run('cat kept.txt')
      expect(r.stdout === 'kept', `the workspace kept over the pause, got ${JSON.stringify(r.stdout)}`)
      const after = await again.getInfo()
      expect(after.state === 'running', `running after connect, got ${after.state}`)
      const left = after.endAt.getTime() - Date.now()
      expect(left > 50_000 && left <= 61_000, `about 60 s left after connect, got ${left} ms`)
      return [info.state, after.state]
    } finally {
      await p.kill()
    }
  })
  await step('lifecycle autoResume: a command resumes a sandbox paused at its timeout', async () => {
    const p = await Sandbox.create({ timeoutMs: 3_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
    try {
      const info = await waitPaused(p, 20_000)
      expect(info.lifecycle && info.lifecycle.autoResume === true, `lifecycle autoResume, got ${JSON.stringify(info.lifecycle)}`)
      const r = await p.commands.run('echo woken')
      expect(r.stdout === 'woken\n', `a command in the resumed sandbox, got ${JSON.stringify(r.stdout)}`)
      return info.state
    } finally {
      await p.kill()
    }
  })
  await step('lifecycle onTimeout pause without keepMemory is not supported', async () =>
    unsupported(() => Sandbox.create({ lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })))
  await step('Sandbox.create with envs (every command\'s default)', async () => {
    const withEnv = await Sandbox.create({ envs: { SANDBOX_GREETING: 'from-create' } })
    try {
      const r = await withEnv.commands.run('echo $SANDBOX_GREETING')
      expect(r.stdout === 'from-create\n', `the create's env, got ${JSON.stringify(r.stdout)}`)
      const o = await withEnv.commands.run('echo $SANDBOX_GREETING', { envs: { SANDBOX_GREETING: 'own' } })
      expect(o.stdout === 'own\n', `a command's own env wins, got ${JSON.stringify(o.stdout)}`)
      return r.stdout.trim()
    } finally {
      await withEnv.kill()
    }
  })
  if (process.env.E2B_WARM_TEMPLATE) {
    // The operator's template (serve --sandbox-templates) of that name:
    // its env, from its warm pool; left running for the caller to check.
    await step('Sandbox.create with the operator\'s template', async () => {
      const warm = await Sandbox.create(process.env.E2B_WARM_TEMPLATE, { metadata: { check: tag } })
      const r = await warm.commands.run('echo $FROM_TEMPLATE')
      expect(r.stdout === 'yes\n', `the template's env, got ${JSON.stringify(r.stdout)}`)
      return warm.sandboxId
    })
  }
  await step('Sandbox.create with another template is not found', async () => {
    try {
      await Sandbox.create('python-3.12')
    } catch (err) {
      expect(/404/.test(err.message) || err.name === 'NotFoundError', `not found, got ${err.message}`)
      return err.message
    }
    throw new Error('created')
  })
  await step('kill', async () => {
    expect(await sbx.kill(), 'kill true')
    expect(!(await Sandbox.kill(sbx.sandboxId)), 'a second kill false')
    const page = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
    expect(page.length === 0, `no sandbox left, got ${JSON.stringify(page)}`)
    return true
  })
  if (failed > 0) {
    console.log(`${failed} step(s) failed`)
    process.exit(1)
  }
  console.log('all steps passed')
}

main().catch((err) => {
  console.log(`FAIL main: ${err.stack}`)
  process.exit(1)
})
