/**
 * An alert rule spec for tests that need a rule on every project's VMs and do not look at its condition:
 * CPU above 90 % at once, no destination (evaluated every cycle, NO_DATA without samples).
 */
export function cpuRuleSpec(over: Record<string, unknown> = {}) {
  return {
    displayName: "CPU high",
    metricId: "cpu_utilization_pct",
    operator: "GREATER_THAN",
    threshold: 90,
    sustainedSeconds: 0,
    severity: "WARNING",
    allVms: true,
    vmNames: [] as string[],
    repeatIntervalSeconds: 0,
    destinationNames: [] as string[],
    ...over,
  } as const;
}
