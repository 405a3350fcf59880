// Usage: node run.mjs <agent-runner binary> <scratch dir>
// Starts `agent-runner serve` (local_process jobs) on a free loopback port,
// lints its GET /openapi.json (lint.mjs), generates TypeScript types from
// it with openapi-typescript (generated/api.d.ts; --empty-objects-unknown,
// so a free-form object such as trace is Record<string, unknown> as JSON
// Schema means, not openapi-typescript's default Record<string, never>),
// type-checks and compiles check.ts against them with tsc, and runs it
// against the server with openapi-fetch. Exits non-zero when any step
// fails.
import { spawn, execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const [binary, root] = process.argv.slice(2);
if (!binary || !root) {
  console.error("usage: node run.mjs <agent-runner> <scratch-dir>");
  process.exit(2);
}

const port = await new Promise((resolve, reject) => {
  const s = createServer();
  s.on("error", reject);
  s.listen(0, "127.0.0.1", () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  });
});
const ws = mkdtempSync(join(root, "openapi-ts-ws-"));
chmodSync(ws, 0o755);
writeFileSync(join(ws, "greeting.txt"), "hello from openapi-fetch\n");
const store = mkdtempSync(join(root, "openapi-ts-store-"));
const url = `http://127.0.0.1:${port}`;

const serve = spawn(binary, ["serve", "--addr", `127.0.0.1:${port}`, "--store-dir", store, "--workers", "2",
  "--log-level", "warn", "--workspace-root", root, "--default-backend", "local_process", "--unsafe-local-process"],
  { stdio: ["ignore", "inherit", "inherit"] });
let exited = false;
serve.on("exit", () => { exited = true; });

function run(cmd, args) {
  execFileSync(cmd, args, { cwd: here, stdio: "inherit" });
}

let code = 0;
try {
  for (let i = 0; ; i++) {
    if (exited) throw new Error("agent-runner serve exited");
    try {
      if ((await fetch(url + "/health")).ok) break;
    } catch {}
    if (i > 200) throw new Error("agent-runner serve did not start");
    await new Promise((r) => setTimeout(r, 50));
  }
  rmSync(join(here, "generated"), { recursive: true, force: true });
  rmSync(join(here, "build"), { recursive: true, force: true });
  mkdirSync(join(here, "generated"));
  const bin = join(here, "node_modules", ".bin");
  run(process.execPath, ["lint.mjs", url + "/openapi.json"]);
  run(join(bin, "openapi-typescript"), [url + "/openapi.json", "--output", "generated/api.d.ts", "--empty-objects-unknown"]);
  run(join(bin, "tsc"), ["-p", "tsconfig.json"]);
  // build/ holds check.js: an ES module (package.json "type": "module").
  run(process.execPath, ["build/check.js", url, ws]);
} catch (e) {
  console.error("FAIL:", e.message);
  code = 1;
} finally {
  serve.kill("SIGTERM");
}
process.exit(code);
