// Runs readme.ts against the server named by LEASEHOLD_URL, with the
// tokens in LEASEHOLD_ADMIN_TOKEN and LEASEHOLD_WORKER_TOKEN
// (tools/apiclients/cmd/runclients sets them); exits non-zero on any
// unexpected answer.
import { readme } from "./readme.js";

// Node's own globals, declared here so that the check needs no @types/node.
declare const process: { env: Record<string, string | undefined>; exitCode?: number };

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

try {
  await readme(env("LEASEHOLD_URL"), env("LEASEHOLD_ADMIN_TOKEN"), env("LEASEHOLD_WORKER_TOKEN"));
} catch (err) {
  console.error("openapi-typescript client:", err instanceof Error ? err.message : err);
  process.exitCode = 1;
}
