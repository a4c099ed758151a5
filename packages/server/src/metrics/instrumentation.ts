import { SvcError } from "../errors.ts";
import { counter, histogram, type Registry } from "../instrument.ts";
import type { ProjectLimiter } from "./concurrency.ts";

/**
 * The per-project query slots, measured from outside whichever limiter is in use (in process or
 * shared through PostgreSQL): how long a query waited for its slot, and how many were refused.
 */
export function instrumentLimiter(limiter: ProjectLimiter, registry: Registry): ProjectLimiter {
  const wait = histogram(
    registry,
    "svc_query_slot_wait_seconds",
    "Time a query (RPC or Prometheus API) waited for one of its project's query slots.",
    [0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
  );
  const refused = counter(
    registry,
    "svc_query_slot_refusals_total",
    "Queries refused (HTTP 429) because their project's query slots stayed busy.",
  );
  return {
    async run(projectId, fn) {
      const t0 = performance.now();
      let started = false;
      try {
        return await limiter.run(projectId, () => {
          started = true;
          wait.observe((performance.now() - t0) / 1000);
          return fn();
        });
      } catch (err) {
        if (!started && err instanceof SvcError && err.code === "resource_exhausted") refused.inc();
        throw err;
      }
    },
    stats: (projectId) => limiter.stats(projectId),
  };
}
