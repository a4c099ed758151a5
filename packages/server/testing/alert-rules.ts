import { randomUUID } from "node:crypto";

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
