import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createRegistry } from "../instrument.ts";
import { destinationKinds } from "./destinations.ts";
import { createNotifyMetrics } from "./instrumentation.ts";

describe("createNotifyMetrics", () => {
  it("starts every destination kind's delivery counters at 0, before any delivery", async () => {
    const registry = createRegistry();
    createNotifyMetrics(registry);
    const text = await registry.metrics();
    for (const kind of destinationKinds.map((k) => k.toLowerCase()))
      for (const outcome of ["sent", "failed", "retried", "skipped"])
        assert.match(
          text,
          new RegExp(`^svc_notify_deliveries_total\\{kind="${kind}",outcome="${outcome}"\\} 0$`, "m"),
          `${kind} ${outcome}`,
        );
  });
});
