/**
 * The stored VM series: what each exported metric is, who may write it, and which per-device labels
 * it carries (docs/ingest.md#what-a-series-must-look-like). Ingest refuses any other name or label, which keeps cardinality bounded and
 * tenants' series predictable; readers (RPCs, export, metadata API) use the same table.
 */
export type Source = "hypervisor" | "guest_agent";
export type MetricType = "counter" | "gauge";

export interface SeriesSpec {
  readonly type: MetricType;
  readonly unit: string;
  readonly help: string;
  /** Who may send it. `derived` series are computed by svc at ingest and refused from clients. */
  readonly writers: readonly Source[] | "derived";
  /** Per-device labels it carries besides the VM labels. */
  readonly labels: readonly string[];
}

const hv: readonly Source[] = ["hypervisor"];
const guest: readonly Source[] = ["guest_agent"];
const both: readonly Source[] = ["hypervisor", "guest_agent"];

export const seriesCatalog: Readonly<Record<string, SeriesSpec>> = {
  svc_vm_cpu_seconds_total: {
    type: "counter",
    unit: "seconds",
    help: "CPU seconds consumed by all vCPUs of the VM.",
    writers: hv,
    labels: [],
  },
  svc_vm_vcpus: { type: "gauge", unit: "", help: "vCPUs of the VM at the time.", writers: hv, labels: [] },
  svc_vm_cpu_utilization_pct: {
    type: "gauge",
    unit: "percent",
    help: "Average utilization of the observed vCPUs over each sampling interval, normalized to the vCPU count of that interval.",
    writers: "derived",
    labels: [],
  },
  svc_vm_memory_total_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Guest-visible memory capacity.",
    writers: both,
    labels: [],
  },
  svc_vm_memory_free_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Guest memory reported free (cache not included).",
    writers: both,
    labels: [],
  },
  svc_vm_memory_used_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Guest memory used: capacity minus free, cache included; not the working set.",
    writers: "derived",
    labels: [],
  },
  svc_vm_memory_cached_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Guest page cache.",
    writers: both,
    labels: [],
  },
  svc_vm_memory_buffers_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Guest buffers.",
    writers: guest,
    labels: [],
  },
  svc_vm_memory_available_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Guest memory available (kernel estimate).",
    writers: guest,
    labels: [],
  },
  svc_vm_disk_read_bytes_total: {
    type: "counter",
    unit: "bytes",
    help: "Bytes read from the virtual disk.",
    writers: hv,
    labels: ["device"],
  },
  svc_vm_disk_written_bytes_total: {
    type: "counter",
    unit: "bytes",
    help: "Bytes written to the virtual disk.",
    writers: hv,
    labels: ["device"],
  },
  svc_vm_disk_reads_completed_total: {
    type: "counter",
    unit: "",
    help: "Read operations completed on the virtual disk.",
    writers: hv,
    labels: ["device"],
  },
  svc_vm_disk_writes_completed_total: {
    type: "counter",
    unit: "",
    help: "Write operations completed on the virtual disk.",
    writers: hv,
    labels: ["device"],
  },
  svc_vm_network_receive_bytes_total: {
    type: "counter",
    unit: "bytes",
    help: "Bytes received on the virtual interface.",
    writers: hv,
    labels: ["interface"],
  },
  svc_vm_network_transmit_bytes_total: {
    type: "counter",
    unit: "bytes",
    help: "Bytes sent on the virtual interface.",
    writers: hv,
    labels: ["interface"],
  },
  svc_vm_network_receive_packets_total: {
    type: "counter",
    unit: "",
    help: "Packets received on the virtual interface.",
    writers: hv,
    labels: ["interface"],
  },
  svc_vm_network_transmit_packets_total: {
    type: "counter",
    unit: "",
    help: "Packets sent on the virtual interface.",
    writers: hv,
    labels: ["interface"],
  },
  svc_vm_filesystem_used_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Bytes used on a mounted filesystem, as the guest reports it (the guest agent, or the hypervisor collector through the QEMU guest agent).",
    writers: both,
    labels: ["mountpoint", "fstype", "device"],
  },
  svc_vm_filesystem_size_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Size of a mounted filesystem, as the guest reports it (the guest agent, or the hypervisor collector through the QEMU guest agent).",
    writers: both,
    labels: ["mountpoint", "fstype", "device"],
  },
  svc_vm_filesystem_avail_bytes: {
    type: "gauge",
    unit: "bytes",
    help: "Bytes of a mounted filesystem available to unprivileged users (df's Avail), as the guest reports it.",
    writers: guest,
    labels: ["mountpoint", "fstype", "device"],
  },
  svc_vm_guest_cpu_seconds_total: {
    type: "counter",
    unit: "seconds",
    help: "CPU seconds as the guest kernel counts them.",
    writers: guest,
    labels: [],
  },
  svc_vm_guest_vcpus: {
    type: "gauge",
    unit: "",
    help: "CPUs the guest kernel sees.",
    writers: guest,
    labels: [],
  },
  svc_vm_guest_disk_read_bytes_total: {
    type: "counter",
    unit: "bytes",
    help: "Bytes read, guest view.",
    writers: guest,
    labels: ["device"],
  },
  svc_vm_guest_disk_written_bytes_total: {
    type: "counter",
    unit: "bytes",
    help: "Bytes written, guest view.",
    writers: guest,
    labels: ["device"],
  },
  svc_vm_guest_disk_reads_completed_total: {
    type: "counter",
    unit: "",
    help: "Reads completed, guest view.",
    writers: guest,
    labels: ["device"],
  },
  svc_vm_guest_disk_writes_completed_total: {
    type: "counter",
    unit: "",
    help: "Writes completed, guest view.",
    writers: guest,
    labels: ["device"],
  },
  svc_vm_guest_network_receive_bytes_total: {
    type: "counter",
    unit: "bytes",
    help: "Bytes received, guest view.",
    writers: guest,
    labels: ["interface"],
  },
  svc_vm_guest_network_transmit_bytes_total: {
    type: "counter",
    unit: "bytes",
    help: "Bytes sent, guest view.",
    writers: guest,
    labels: ["interface"],
  },
  svc_vm_guest_network_receive_packets_total: {
    type: "counter",
    unit: "",
    help: "Packets received, guest view.",
    writers: guest,
    labels: ["interface"],
  },
  svc_vm_guest_network_transmit_packets_total: {
    type: "counter",
    unit: "",
    help: "Packets sent, guest view.",
    writers: guest,
    labels: ["interface"],
  },
  svc_vm_last_observation_timestamp_seconds: {
    type: "gauge",
    unit: "seconds",
    help: "Source observation time of the newest sample received for the VM, per source.",
    writers: "derived",
    labels: [],
  },
};
