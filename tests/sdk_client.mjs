// Drives terminal-tools with the official MCP TypeScript SDK, the library desktop
// clients are built on, and checks every tool's result against its output schema.
//
//   node tests/sdk_client.mjs stdio <python> <workdir>
//   node tests/sdk_client.mjs http <url> <token> <workdir>
//
// Prints one JSON object on stdout: {"calls": [...], "failures": [...], ...}. The
// pytest side (tests/test_clients.py) asserts on it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { pathToFileURL } from "node:url";
import Ajv from "ajv";

const [mode, ...rest] = process.argv.slice(2);
const workdir = rest[rest.length - 1];
const failures = [];
const calls = [];
const report = { calls, failures };

const client = new Client(
  { name: "sdk-client-test", version: "1.0.0" },
  { capabilities: { roots: { listChanged: false } } },
);
client.setRequestHandler(ListRootsRequestSchema, async () => ({
  roots: [{ uri: pathToFileURL(workdir).href, name: "workdir" }],
}));

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({
    command: rest[0],
    args: ["-m", "terminal_tools"],
    env: { HOME: process.env.HOME ?? "/tmp", PATH: process.env.PATH ?? "/usr/bin:/bin" },
    stderr: "pipe",
  });
} else {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]), {
    requestInit: { headers: { Authorization: `Bearer ${rest[1]}` } },
  });
}
let stderr = "";
await client.connect(transport);
if (mode === "stdio" && transport.stderr) {
  transport.stderr.on("data", (chunk) => { stderr += chunk.toString(); });
}
report.server = client.getServerVersion();

const ajv = new Ajv({ strict: false, allErrors: true });
const { tools } = await client.listTools();
report.tools = tools.map((t) => t.name);
const validators = {};
for (const tool of tools) {
  if (tool.outputSchema) validators[tool.name] = ajv.compile(tool.outputSchema);
  else failures.push(`${tool.name}: no outputSchema`);
}

async function call(name, args, { expectError = false } = {}) {
  let result;
  try {
    result = await client.callTool({ name, arguments: args });
  } catch (error) {
    // The SDK itself throws when structuredContent does not match the schema.
    failures.push(`${name}: ${error.message}`);
    calls.push({ name, error: error.message });
    return null;
  }
  const entry = { name, isError: !!result.isError };
  calls.push(entry);
  if (result.isError) {
    entry.text = result.content?.[0]?.text ?? "";
    if (!expectError) failures.push(`${name}: unexpected error: ${entry.text}`);
    return null;
  }
  if (expectError) failures.push(`${name}: expected an error`);
  const validate = validators[name];
  if (!result.structuredContent) {
    failures.push(`${name}: no structuredContent`);
  } else if (validate && !validate(result.structuredContent)) {
    failures.push(`${name}: schema: ${ajv.errorsText(validate.errors)}`);
  } else {
    entry.validated = true;
  }
  return result.structuredContent;
}

// Every tool, called the way an agent would.
const small = await call("terminal_exec", { command: "pwd" });
report.exec_cwd = small?.stdout?.trim();
const big = await call("terminal_exec", {
  command: "seq 1 40000", max_output_kb: 1,
});
if (big?.output_handle) {
  await call("terminal_output_get", { output_handle: big.output_handle, max_kb: 4 });
  await call("terminal_output_get", { output_handle: big.output_handle, pattern: "^3999" });
} else {
  failures.push("terminal_exec: no output_handle for 40000 lines at max_output_kb=1");
}
const job = await call("terminal_job_start", { command: "cat", name: "sdk-cat" });
if (job?.job_id) {
  await call("terminal_job_manage", { action: "stdin", job_id: job.job_id, data: "hello\n" });
  await call("terminal_job_manage", { action: "list" });
  await call("terminal_job_logs", { job_id: job.job_id, wait_for: "hello", wait_timeout_sec: 10 });
  await call("terminal_job_manage", { action: "close_stdin", job_id: job.job_id });
  const done = await call("terminal_job_logs", {
    job_id: job.job_id, wait_until_exit: true, wait_timeout_sec: 20,
  });
  report.job_stdout = done?.data ?? done?.stdout ?? null;
}
await call("terminal_rg", { pattern: "def build_server", path: workdir });
await call("terminal_glob", { pattern: "server.py", path: workdir });
if (report.tools.includes("terminal_pty_open")) {
  const pty = await call("terminal_pty_open", {});
  if (pty?.session_id) {
    const ran = await call("terminal_pty_run", { session_id: pty.session_id, command: "echo pty-ok" });
    report.pty_stdout = ran?.output ?? null;
    await call("terminal_pty_run", { session_id: pty.session_id, read_only: true, screen: true });
    await call("terminal_pty_close", { session_id: pty.session_id });
  }
}
// Refusals are tool errors with a readable reason, and the server keeps serving.
await call("terminal_job_logs", { job_id: "job-does-not-exist" }, { expectError: true });
const gone = await call("terminal_output_get", { output_handle: "nope" });
if (gone && gone.expired !== true) failures.push("terminal_output_get: unknown handle not expired");
report.after_errors = (await call("terminal_exec", { command: "echo still-serving" }))?.stdout;

const called = new Set(calls.filter((c) => c.validated).map((c) => c.name));
report.unvalidated_tools = report.tools.filter((t) => !called.has(t));

const info = await client.readResource({ uri: "terminal://server-info" });
report.server_info = JSON.parse(info.contents[0].text);
const resources = await client.listResources();
report.skill_resources = resources.resources
  .map((r) => r.uri)
  .filter((u) => u.startsWith("skill://")).length;

await client.close();
report.stderr = stderr;

if (mode === "http") {
  // What the SDK tells its user when the token is missing or wrong.
  report.refusals = {};
  for (const [label, headers] of [["missing", {}], ["wrong", { Authorization: "Bearer nope" }]]) {
    const refused = new Client({ name: "sdk-client-test", version: "1.0.0" });
    try {
      await refused.connect(new StreamableHTTPClientTransport(new URL(rest[0]), {
        requestInit: { headers },
      }));
      report.refusals[label] = "connected";
    } catch (error) {
      report.refusals[label] = String(error?.message ?? error);
    }
  }
}
process.stdout.write(JSON.stringify(report) + "\n");
