// Times Sandbox.create + commands.run('true') through the official e2b
// SDK (installed in E2B_SDK_DIR) against the serve that E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY name, BENCH_N times for each of the
// templates in BENCH_MODES (comma-separated name=templateID), interleaved
// iteration by iteration so that they share the machine's load. Each
// sandbox is killed after it is timed (not timed). Before the timed
// iterations one untimed round warms node, the SDK and the connections.
// It asks serve (AGENT_RUNNER_URL) how each sandbox started, and prints
// one JSON object: for each mode, the create and run milliseconds of
// every timed iteration and the count of each start ("warm", "cold")
// over all of them, the untimed round's too.
const { createRequire } = require('node:module')
const { performance } = require('node:perf_hooks')
const { Sandbox } = createRequire(process.env.E2B_SDK_DIR + '/')('e2b')

const n = Number(process.env.BENCH_N)
const modes = process.env.BENCH_MODES.split(',').map((m) => m.split('='))

async function start(id) {
  const resp = await fetch(`${process.env.AGENT_RUNNER_URL}/v1/sandboxes/${id}`)
  if (!resp.ok) throw new Error(`GET /v1/sandboxes/${id}: ${resp.status}`)
  return (await resp.json()).start
}

async function once(template) {
  const t0 = performance.now()
  const sbx = await Sandbox.create(template)
  const t1 = performance.now()
  const r = await sbx.commands.run('true')
  const t2 = performance.now()
  if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`)
  const how = await start(sbx.sandboxId)
  await sbx.kill()
  return { create: t1 - t0, run: t2 - t1, start: how }
}

async function main() {
  const out = {}
  for (const [name] of modes) out[name] = { create: [], run: [], starts: {} }
  for (let i = 0; i <= n; i++) {
    for (const [name, template] of modes) {
      const r = await once(template)
      const m = out[name]
      m.starts[r.start] = (m.starts[r.start] || 0) + 1
      if (i === 0) continue // the untimed round
      m.create.push(r.create)
      m.run.push(r.run)
    }
  }
  console.log(JSON.stringify(out))
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
