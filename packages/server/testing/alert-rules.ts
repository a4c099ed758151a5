import { randomUUID } from "node:crypto";
import { labelsFromRecord } from "../src/storage/interface.ts";
import type { TestApp } from "./harness.ts";

/**
 * A SaveAlertRule request creating a new rule (a fresh id, version 0) that watches every VM's CPU above
 * 90 % at once: the rule tests save when what matters is who saved it, not what it watches.
 */
export function newCpuRule(
  projectName: string,
  spec: {
    threshold?: number;
    displayName?: string;
    allVms?: boolean;
    vmNames?: string[];
    destinationNames?: string[];
  } = {},
) {
  return {
    projectName,
    id: randomUUID(),
    requestId: randomUUID(),
    expectedVersion: "0",
    spec: {
      displayName: "cpu",
      metricId: "cpu_utilization_pct",
      operator: "GREATER_THAN",
      threshold: 90,
      sustainedSeconds: 0,
      severity: "WARNING",
      allVms: true,
      ...spec,
    },
  };
}

/**
 * Writes `vm`'s hypervisor CPU utilization at 97 % every 30 s for `spanMs` up to `now` into the embedded store,
 * then runs one evaluation cycle at `now`: a CPU rule above 90 % (newCpuRule) opens its incident.
 */
export async function fireHotCpu(
  t: TestApp,
  projectId: string,
  vm: string,
  now: number,
  spanMs = 120_000,
): Promise<void> {
  const a = t.app.tsdb.appender();
  const labels = labelsFromRecord({
    __name__: "svc_vm_cpu_utilization_pct",
    project_id: projectId,
    vm,
    vm_id: vm.split("/").pop() ?? vm,
    location: "dc-1",
    source: "hypervisor",
  });
  for (let ts = now - spanMs; ts <= now; ts += 30_000) a.append(labels, ts, 97);
  await a.commit();
  await t.app.evaluator.runCycle(now);
}
