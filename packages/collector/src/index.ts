export { type Collector, type CollectorStats, createCollector } from "./collector.ts";
export { METADATA_NAMESPACE } from "./identity.ts";
export { LibvirtClient, STATS_STATE, uuidString } from "./libvirt/remote.ts";
export { CollectorConfigError, type CollectorOptions, resolveCollectorOptions } from "./options.ts";
