// Drives the official e2b SDK (installed in E2B_SDK_DIR) against an
// agent-runner serve, as sdk_compat.cjs does, for what the server
// refuses and how the SDK surfaces it:
//
//   - with E2B_EGRESS_ALLOWED (a host:port in serve's --egress-allow,
//     serving /hello.txt) and E2B_EGRESS_OTHER (another host:port in the
//     ceiling, not asked for): a sandbox created with
//     network.allowOut [ALLOWED] and denyOut [ALL_TRAFFIC] reaches its
//     host through the egress gateway; a request to a host outside the
//     ceiling, or inside it but not in allowOut, is answered 403 by the
//     gateway, which the SDK raises as CommandExitError with the denial
//     in stderr; a create asking allowOut beyond the ceiling is refused
//     (403 policy.network_denied) and the SDK raises it;
//   - with E2B_POLICY_DENIED (serve's --sandbox-policy denies the
//     shell): commands.run is refused before it runs, and the SDK raises
//     the refusal with the policy code.
//
// Each step prints "ok <step>: <result>" or "FAIL <step>: <error>"; the
// script exits 1 if any failed.
const { createRequire } = require('node:module')
const sdk = createRequire(process.env.E2B_SDK_DIR + '/')('e2b')
const { Sandbox, CommandExitError, ALL_TRAFFIC } = sdk

let failed = 0
async function step(name, fn) {
  try {
    console.log(`ok ${name}: ${JSON.stringify(await fn())}`)
  } catch (err) {
    failed++
    console.log(`FAIL ${name}: ${err && err.stack ? err.stack : err}`)
  }
}
function expect(cond, what) {
  if (!cond) throw new Error(`expected ${what}`)
}
// refused runs fn, which must throw; it returns the error.
async function refused(fn) {
  try {
    await fn()
  } catch (err) {
    return err
  }
  throw new Error('expected a refusal, the call succeeded')
}

async function egress(allowed, other) {
  const sbx = await Sandbox.create({ network: { allowOut: [allowed], denyOut: [ALL_TRAFFIC] }, timeoutMs: 120_000 })
  try {
    await step('Sandbox.create with network.allowOut', async () => {
      const info = await sbx.getInfo()
      expect(JSON.stringify(info.network && info.network.allowOut) === JSON.stringify([allowed]), `allowOut [${allowed}], got ${JSON.stringify(info.network)}`)
      return { sandboxId: sbx.sandboxId, allowOut: info.network.allowOut }
    })
    await step('a host in allowOut is reached through the egress gateway', async () => {
      const r = await sbx.commands.run(`curl -sS --fail-with-body http://${allowed}/hello.txt`)
      expect(r.stdout === 'hello through the gateway\n', `the page, got ${JSON.stringify(r)}`)
      return r.stdout
    })
    // curl prints the gateway's answer (403, "refused (reason: ...)")
    // and exits 22; Python's urllib raises HTTPError 403.
    const denied = async (cmd, reason) => {
      const err = await refused(() => sbx.commands.run(cmd))
      expect(err instanceof CommandExitError, `a CommandExitError, got ${err}`)
      expect(reason.test(err.stderr), `${reason} in stderr, got ${JSON.stringify(err.stderr)}`)
      return { exitCode: err.exitCode, stderr: err.stderr.trim().split('\n').pop() }
    }
    await step('a host outside the ceiling is refused (curl, CommandExitError)', () =>
      denied('curl -sS --fail-with-body http://example.org/ >&2', /^agent-runner egress: example\.org:80 refused \(not_allowed: .*\)$/m))
    await step('a host outside the ceiling is refused (python urllib, CommandExitError)', () =>
      denied(`python3 -c 'import urllib.request as u; u.urlopen("https://example.org/")'`, /403/))
    await step('a host in the ceiling but not in allowOut is refused', () =>
      denied(`curl -sS --fail-with-body http://${other}/hello.txt >&2`, /refused \(not_allowed: /))
  } finally {
    await sbx.kill()
  }
  await step('Sandbox.create with allowOut beyond the ceiling is refused', async () => {
    const err = await refused(() => Sandbox.create({ network: { allowOut: ['beyond.example.net'], denyOut: [ALL_TRAFFIC] } }))
    expect(/^403: .*\(policy\.network_denied\)/.test(err.message), `403 policy.network_denied, got ${err.name}: ${err.message}`)
    return `${err.name}: ${err.message}`
  })
}

async function policy() {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 })
  try {
    await step("commands.run the operator's session policy denies", async () => {
      const err = await refused(() => sbx.commands.run('echo never'))
      expect(!(err instanceof CommandExitError), `a refusal, not an exit, got ${err}`)
      expect(/\(policy\.[a-z_]+\)/.test(err.message), `a policy code, got ${err.name}: ${err.message}`)
      return `${err.name}: ${err.message}`
    })
  } finally {
    await sbx.kill()
  }
}

async function main() {
  const { E2B_EGRESS_ALLOWED: allowed, E2B_EGRESS_OTHER: other, E2B_POLICY_DENIED: denied } = process.env
  if (allowed) await egress(allowed, other)
  if (denied) await policy()
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
