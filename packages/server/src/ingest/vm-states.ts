import type { FastifyInstance } from "fastify";
import type { Db } from "../db/database.ts";
import { SvcError } from "../errors.ts";
import { recordStateEvent } from "../inventory/vms.ts";
import { ingestPrincipalOr401 } from "./credentials.ts";

export const VM_STATES_PATH = "/v1/ingest/vm-states";
const MAX_EVENTS = 10_000;

interface Deps {
  readonly db: Db;
  readonly collectorToken: string;
  readonly now: () => number;
}

/**
 * The hypervisor collector's state changes (docs/hypervisor.md): `{"events": [{vm, state, stopReason,
 * timeUnix}]}` with the collector token, recorded in order as RecordVMStateEvent records them. The
 * collector token may change any VM's state, as it may write any VM's hypervisor series; a guest-agent
 * token may not (403). Answers like remote write: 204 when every event was recorded; 400 naming each
 * refused event (unknown VM, bad state) while the others were recorded, which a collector does not
 * retry; 401 for a bad token.
 */
export function registerVmStateRoute(scope: FastifyInstance, deps: Deps): void {
  scope.post(VM_STATES_PATH, async (req, reply) => {
    const principal = await ingestPrincipalOr401(req, reply, deps);
    if (!principal) return reply;
    if (principal.kind !== "collector") {
      return reply
        .code(403)
        .type("text/plain")
        .send("only the hypervisor collector's token records VM states\n");
    }
    const events = (req.body as { events?: unknown } | undefined)?.events;
    if (!Array.isArray(events) || events.length > MAX_EVENTS) {
      return reply
        .code(422)
        .type("text/plain")
        .send(`events: must be an array of at most ${MAX_EVENTS} {vm, state, stopReason, timeUnix}\n`);
    }
    let accepted = 0;
    const refused: string[] = [];
    for (const [i, e] of events.entries()) {
      const ev = (e ?? {}) as Record<string, unknown>;
      const timeUnix = typeof ev.timeUnix === "number" && Number.isSafeInteger(ev.timeUnix) ? ev.timeUnix : 0;
      if (typeof ev.vm !== "string" || typeof ev.state !== "string" || timeUnix <= 0) {
        refused.push(`events[${i}]: needs vm and state strings and a positive integer timeUnix`);
        continue;
      }
      try {
        await recordStateEvent(
          deps.db,
          {
            vm: ev.vm,
            state: ev.state,
            stopReason: typeof ev.stopReason === "string" ? ev.stopReason : "",
            timeUnix: BigInt(timeUnix),
          },
          deps.now(),
        );
        accepted++;
      } catch (err) {
        if (!(err instanceof SvcError)) throw err;
        refused.push(`events[${i}] (${ev.vm.slice(0, 200)}): ${err.message}`);
      }
    }
    if (refused.length === 0) return reply.code(204).send();
    return reply
      .code(400)
      .type("text/plain")
      .send(`accepted ${accepted} events; refused ${refused.length}: ${refused.slice(0, 5).join(" | ")}\n`);
  });
}
