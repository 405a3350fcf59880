// Usage (run.mjs does this): node build/check.js <serve URL> <workspace>
// Calls agent-runner's job API through openapi-fetch, typed by the types
// openapi-typescript generated from the server's own /openapi.json
// (generated/api.d.ts): submit a job, long-poll it to its result, list it,
// cancel it (a finished job answers its result). tsc type-checks every
// call against the document first, so a schema that lost its fields, a
// missing operationId or branches that cannot be told apart fail the
// build, and any answer that does not match fails the run.
import createClient from "openapi-fetch";
import type { components, operations, paths } from "./generated/api.js";

declare const process: { argv: string[]; exit(code: number): never };

type RunJobRequest = components["schemas"]["RunJobRequest"];
type RunJobResult = components["schemas"]["RunJobResult"];
type ActiveJobStatus = components["schemas"]["ActiveJobStatus"];

// Type-level checks: the operations are named, and the request type is the
// full schema (an empty object type would accept these).
type _Named = [operations["submitJob"], operations["getJob"], operations["listJobs"], operations["cancelJob"],
  operations["listArtifacts"], operations["downloadArtifact"], operations["submitTask"]];
// @ts-expect-error command is required
const _noCommand: RunJobRequest = { workspace: { path: "/x" } };
// @ts-expect-error additionalProperties: false
const _unknownField: RunJobRequest = { workspace: { path: "/x" }, command: { argv: ["true"] }, nope: 1 };
// @ts-expect-error a job in progress has no terminal status
const _activeDone: ActiveJobStatus = { job_id: "j", status: "completed", updated_at: "" };

function fail(msg: string): never {
  console.error("FAIL:", msg);
  process.exit(1);
}

const [baseUrl, workspace] = process.argv.slice(2);
if (!baseUrl || !workspace) fail("usage: node build/check.js <serve URL> <workspace>");

const client = createClient<paths>({ baseUrl });

const body: RunJobRequest = {
  workspace: { path: workspace },
  command: { argv: ["cat", "greeting.txt"] },
  policy: { allowed_commands: ["cat"] },
  backend: { kind: "local_process" },
  limits: { timeout_ms: 20000 },
  trace: { client: "openapi-fetch" },
};
const submitted = await client.POST("/v1/jobs", { body });
if (!submitted.data) fail(`submitJob: ${submitted.response.status} ${JSON.stringify(submitted.error)}`);
const jobId = submitted.data.job_id;

// getJob answers ActiveJobStatus | RunJobResult; the discriminator, status,
// narrows it (openapi-typescript gives each branch its mapped statuses).
let result: RunJobResult | undefined;
for (let i = 0; i < 10 && !result; i++) {
  const got = await client.GET("/v1/jobs/{job_id}", { params: { path: { job_id: jobId }, query: { wait: "20s" } } });
  if (!got.data) fail(`getJob: ${got.response.status} ${JSON.stringify(got.error)}`);
  const view = got.data;
  switch (view.status) {
    case "queued":
    case "running":
      if ("started_at" in view) fail(`a job in progress came with a result: ${JSON.stringify(view)}`);
      break;
    default:
      result = view;
  }
}
if (!result) fail(`job ${jobId} did not finish`);
if (result.status !== "completed" || result.exit_code !== 0) fail(`result: ${JSON.stringify(result)}`);
if (result.backend !== "local_process") fail(`backend: ${result.backend}`);
if (result.stdout.text !== "hello from openapi-fetch\n") fail(`stdout: ${JSON.stringify(result.stdout)}`);
if ((result.trace as { client?: string } | undefined)?.client !== "openapi-fetch") fail("trace not echoed");
if (!/^sha256:[0-9a-f]{64}$/.test(result.policy_decision.policy_version)) fail("policy_version");

const listed = await client.GET("/v1/jobs", { params: { query: { status: "completed" } } });
if (!listed.data?.jobs.some((j) => j.job_id === jobId && j.status === "completed")) fail(`listJobs: ${JSON.stringify(listed.data)}`);

const artifacts = await client.GET("/v1/jobs/{job_id}/artifacts", { params: { path: { job_id: jobId } } });
if (artifacts.response.status !== 200) fail(`listArtifacts: ${artifacts.response.status}`);

// cancelJob of a finished job: 200 with the result it already had.
const canceled = await client.DELETE("/v1/jobs/{job_id}", { params: { path: { job_id: jobId } } });
if (canceled.response.status !== 200 || !canceled.data || !("started_at" in canceled.data) || canceled.data.status !== "completed")
  fail(`cancelJob: ${canceled.response.status} ${JSON.stringify(canceled.data)}`);

// An error answer is typed as the Error schema.
const missing = await client.GET("/v1/jobs/{job_id}", { params: { path: { job_id: "no-such-job" } } });
if (missing.response.status !== 404 || missing.error?.error.code !== "job.not_found")
  fail(`getJob of an unknown job: ${missing.response.status} ${JSON.stringify(missing.error)}`);

console.log(`ok: job ${jobId} ${result.status} through openapi-fetch with types generated from /openapi.json`);
