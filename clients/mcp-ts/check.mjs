// Usage: node check.mjs <agent-runner binary> <workspace root>
// Starts `agent-runner mcp` over stdio with the official TypeScript SDK
// client, lists the tools and calls sandbox.run, sandbox.status and a
// refused shell run. Exits non-zero on any mismatch.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { mkdtempSync, writeFileSync, chmodSync } from "node:fs";
import { join } from "node:path";

const [binary, root] = process.argv.slice(2);
if (!binary || !root) {
  console.error("usage: node check.mjs <agent-runner> <workspace-root>");
  process.exit(2);
}
const ws = mkdtempSync(join(root, "ts-ws-"));
chmodSync(ws, 0o755);
writeFileSync(join(ws, "greeting.txt"), "hello from typescript\n");
const store = mkdtempSync(join(root, "ts-store-"));
// `agent-runner mcp` runs jobs on linux_sandbox, whose uid must reach the store.
chmodSync(store, 0o755);

const transport = new StdioClientTransport({
  command: binary,
  args: ["mcp", "--workspace-root", root, "--store-dir", store],
});
const client = new Client({ name: "ts-sdk-check", version: "1.0.0" });
await client.connect(transport);

function fail(msg) {
  console.error("FAIL:", msg);
  process.exit(1);
}

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort().join(",");
if (names !== "sandbox.artifacts,sandbox.cancel,sandbox.run,sandbox.status") fail(`tools: ${names}`);

const run = await client.callTool({
  name: "sandbox.run",
  arguments: {
    workspace_path: ws,
    argv: ["cat", "greeting.txt"],
    policy: { allowed_commands: ["cat"] },
    trace: { trace_id: "tr_ts", gateway_policy_id: "agent-tools-v1" },
  },
});
const out = run.structuredContent;
if (run.isError || out?.status !== "completed") fail(`sandbox.run: ${JSON.stringify(run)}`);
if (out.result.stdout.text !== "hello from typescript\n") fail(`stdout: ${out.result.stdout.text}`);
if (out.result.trace.gateway_policy_id !== "agent-tools-v1") fail("trace not echoed");

const status = await client.callTool({ name: "sandbox.status", arguments: { job_id: out.job_id } });
if (status.structuredContent?.status !== "completed") fail(`status: ${JSON.stringify(status)}`);

const shell = await client.callTool({
  name: "sandbox.run",
  arguments: { workspace_path: ws, argv: ["sh", "-c", "cat greeting.txt"] },
});
if (!shell.isError || !shell.content[0].text.includes("policy.shell_denied")) fail(`shell: ${JSON.stringify(shell)}`);

await client.close();
console.log(`ok: TypeScript SDK client ran ${out.job_id} (${out.result.backend}) and was refused a shell`);
