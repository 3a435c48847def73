// The README's calls through openapi-fetch, typed by what
// openapi-typescript generates from web/openapi.json with its default
// options. `make check-clients` type-checks it (tsc --noEmit): a
// free-form object generated as Record<string, never>, a field with a
// server-side default generated as required, or a cap that cannot be
// cleared with null is a type error here.
import createClient from "openapi-fetch";
import type { components, paths } from "./gen/api";

type NewJob = components["schemas"]["NewJob"];

export async function readme(baseUrl: string, adminToken: string, workerToken: string): Promise<void> {
  const admin = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${adminToken}` } });
  const worker = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${workerToken}` } });
  const queue = "ts-readme";

  // The README's first job: only kind and payload, every other field left
  // to the server's defaults.
  const job: NewJob = {
    kind: "app_investigation",
    queue,
    payload: { app: "com.example.notes", instructions: "Open settings", sim: { steps: 5, step_ms: 800 } },
  };
  const created = await admin.POST("/api/v1/jobs", { body: job });
  if (created.error || created.response.status !== 201) throw new Error(`submit: ${JSON.stringify(created.error)}`);
  const id: number = created.data.id;
  const app: unknown = created.data.payload["app"];
  if (app !== "com.example.notes") throw new Error(`payload.app = ${String(app)}`);

  // Cap the queue, then clear the cap with null.
  await admin.PATCH("/api/v1/queues/{name}", { params: { path: { name: queue } }, body: { max_running: 3 } });
  const uncapped = await admin.PATCH("/api/v1/queues/{name}", { params: { path: { name: queue } }, body: { max_running: null } });
  if (uncapped.data?.max_running !== null) throw new Error("the cap is still set");

  // The README's schedule.
  const schedule = await admin.POST("/api/v1/schedules", {
    body: { name: "ts-nightly", cron: "30 2 * * *", job: { kind: "app_investigation", payload: { app: "com.example.notes" } } },
  });
  if (schedule.error) throw new Error(`schedule: ${schedule.error.error}`);
  const scheduledApp: unknown = schedule.data.job.payload["app"];
  if (scheduledApp !== "com.example.notes") throw new Error("schedule payload lost");

  // The worker protocol: claim, heartbeat, complete with a result.
  const claimed = await worker.POST("/api/v1/worker/claim", { body: { queues: [queue], lease_ms: 60000 } });
  if (claimed.error) throw new Error(`claim: ${claimed.error.error}`);
  const lease = claimed.data.jobs[0];
  if (!lease || lease.id !== id) throw new Error("claimed another job");
  const claimedApp: unknown = lease.payload["app"];
  if (claimedApp !== "com.example.notes") throw new Error("claimed payload lost");
  const path = { params: { path: { id } } };
  const hb = await worker.POST("/api/v1/worker/jobs/{id}/heartbeat", { ...path, body: { lease_token: lease.lease_token } });
  if (hb.error || hb.data.remaining_ms <= 0) throw new Error("heartbeat");
  const done = await worker.POST("/api/v1/worker/jobs/{id}/complete", {
    ...path,
    body: { lease_token: lease.lease_token, result: { verdict: "ok", screens: 3 } },
  });
  if (done.error || done.data.state !== "succeeded") throw new Error("complete");

  // Payload and result, read back.
  const got = await admin.GET("/api/v1/jobs/{id}", path);
  if (got.error) throw new Error(`get: ${got.error.error}`);
  const verdict: unknown = got.data.result?.["verdict"];
  const instructions: unknown = got.data.payload["instructions"];
  if (verdict !== "ok" || instructions !== "Open settings") throw new Error("payload or result lost");
  for (const e of got.data.events) {
    const detail: Record<string, unknown> | null = e.detail;
    void detail;
  }
}
