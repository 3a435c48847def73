// The README's calls through openapi-fetch, typed by what
// openapi-typescript generates from web/openapi.json with its default
// options. `make check-clients` type-checks it (a free-form object
// generated as Record<string, never>, a field with a server-side default
// generated as required, or a cap that cannot be cleared with null is a
// type error here), then runs it against a real server (run.ts): any
// answer other than the one expected throws.
import createClient from "openapi-fetch";
import type { components, paths } from "./gen/api";

type NewJob = components["schemas"]["NewJob"];

// ok throws unless the call answered the status expected.
function ok(what: string, r: { response: Response; error?: unknown }, status: number): void {
  if (r.response.status !== status) {
    throw new Error(`${what}: answered ${r.response.status} ${JSON.stringify(r.error)}, want ${status}`);
  }
}

// same throws unless got and want are the same JSON value.
function same(what: string, got: unknown, want: unknown): void {
  const canon = (v: unknown): unknown =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, x]) => [k, canon(x)]))
      : Array.isArray(v) ? v.map(canon) : v;
  if (JSON.stringify(canon(got)) !== JSON.stringify(canon(want))) {
    throw new Error(`${what} = ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

export async function readme(baseUrl: string, adminToken: string, workerToken: string): Promise<void> {
  const admin = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${adminToken}` } });
  const worker = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${workerToken}` } });
  const queue = "ts-readme";

  // The README's first job: only kind and payload, every other field left
  // to the server's defaults.
  const payload = { app: "com.example.notes", instructions: "Open settings", sim: { steps: 5, step_ms: 800 } };
  const job: NewJob = { kind: "app_investigation", queue, payload };
  const created = await admin.POST("/api/v1/jobs", { body: job });
  ok("submit", created, 201);
  if (!created.data) throw new Error("submit: no body");
  const id: number = created.data.id;
  const app: unknown = created.data.payload["app"];
  if (app !== "com.example.notes") throw new Error(`payload.app = ${String(app)}`);
  same("payload as submitted", created.data.payload, payload);

  // Cap the queue, then clear the cap with null.
  const capped = await admin.PATCH("/api/v1/queues/{name}", { params: { path: { name: queue } }, body: { max_running: 3 } });
  ok("cap", capped, 200);
  if (capped.data?.max_running !== 3) throw new Error(`capping: max_running = ${String(capped.data?.max_running)}, want 3`);
  const uncapped = await admin.PATCH("/api/v1/queues/{name}", { params: { path: { name: queue } }, body: { max_running: null } });
  ok("clear the cap", uncapped, 200);
  if (uncapped.data?.max_running !== null) throw new Error("the cap is still set");

  // The README's schedule.
  const schedule = await admin.POST("/api/v1/schedules", {
    body: {
      name: "ts-nightly",
      cron: "30 2 * * *",
      job: { kind: "app_investigation", queue: `${queue}-nightly`, payload: { app: "com.example.notes" } },
    },
  });
  ok("schedule", schedule, 201);
  if (!schedule.data) throw new Error("schedule: no body");
  const scheduledApp: unknown = schedule.data.job.payload["app"];
  if (scheduledApp !== "com.example.notes") throw new Error("schedule payload lost");

  // The worker protocol: claim, heartbeat, complete with a result.
  const claimed = await worker.POST("/api/v1/worker/claim", { body: { queues: [queue], lease_ms: 60000 } });
  ok("claim", claimed, 200);
  if (!claimed.data) throw new Error("claim: no body");
  const lease = claimed.data.jobs[0];
  if (!lease || lease.id !== id) throw new Error("claimed another job");
  const claimedApp: unknown = lease.payload["app"];
  if (claimedApp !== "com.example.notes") throw new Error("claimed payload lost");
  same("payload as claimed", lease.payload, payload);
  const path = { params: { path: { id } } };
  const hb = await worker.POST("/api/v1/worker/jobs/{id}/heartbeat", { ...path, body: { lease_token: lease.lease_token } });
  ok("heartbeat", hb, 200);
  if (!hb.data || hb.data.remaining_ms <= 0) throw new Error(`heartbeat: remaining_ms = ${String(hb.data?.remaining_ms)}`);
  const result = { verdict: "ok", screens: 3 };
  const done = await worker.POST("/api/v1/worker/jobs/{id}/complete", { ...path, body: { lease_token: lease.lease_token, result } });
  ok("complete", done, 200);
  if (done.data?.state !== "succeeded") throw new Error(`complete: state = ${String(done.data?.state)}`);

  // Payload and result, read back.
  const got = await admin.GET("/api/v1/jobs/{id}", path);
  ok("get", got, 200);
  if (!got.data) throw new Error("get: no body");
  const verdict: unknown = got.data.result?.["verdict"];
  const instructions: unknown = got.data.payload["instructions"];
  if (verdict !== "ok" || instructions !== "Open settings") throw new Error("payload or result lost");
  same("payload read back", got.data.payload, payload);
  same("result read back", got.data.result, result);
  for (const e of got.data.events) {
    const detail: Record<string, unknown> | null = e.detail;
    void detail;
  }
}
