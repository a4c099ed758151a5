/**
 * The configurations of docs/agent.md's "Use the agent you already run", one text for the docs and the
 * console's "Install expanded monitoring": node_exporter scraped by vmagent or by Prometheus in agent
 * mode (remote write), and an OpenTelemetry Collector (OTLP/HTTP). The token is always read from a
 * file, never given on a command line. Plain functions of svc's base URL, so test/guest-sender-configs.test.ts
 * holds them equal to the docs' blocks (test/node-exporter-senders.test.ts runs those blocks with the real tools).
 */

/** Where each configuration reads the VM's guest-agent token. */
export const TOKEN_FILE = "/etc/svc-agent/token";

/** The node_exporter series svc maps (ingest/node-exporter.ts); the rest is refused, so not sent. */
const KEEP =
  "node_cpu_seconds_total|node_memory_(MemTotal|MemFree|MemAvailable|Cached|Buffers)_bytes|node_filesystem_(size|free|avail)_bytes|node_filesystem_readonly|node_disk_(read|written)_bytes_total|node_disk_(reads|writes)_completed_total|node_network_(receive|transmit)_(bytes|packets)_total";

const SCRAPE = `global:
  scrape_interval: 30s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ["127.0.0.1:9100"]
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: "${KEEP}"
        action: keep
`;

/**
 * Reads the token at a prompt into a file only root and `group` (the sender's) read: the token is
 * never an argument, so it is not in the shell's history or the process list.
 */
export function tokenFileCommand(group: string): string {
  return `echo 'Paste the agent token, then Enter:'
read -rs SVC_AGENT_TOKEN && printf '%s' "$SVC_AGENT_TOKEN" \\
  | sudo install -D -m 0640 -o root -g ${group} /dev/stdin ${TOKEN_FILE}
`;
}

/** vmagent's scrape configuration (`-promscrape.config`). */
export function vmagentScrapeYaml(): string {
  return `# vmagent -promscrape.config\n${SCRAPE}`;
}

/** vmagent's flags: remote write to svc with the token read from the file. */
export function vmagentFlags(baseUrl: string): string {
  return `vmagent -promscrape.config=/etc/vmagent/scrape.yml \\
  -remoteWrite.url=${baseUrl}/v1/ingest/prometheus/api/v1/write \\
  -remoteWrite.bearerTokenFile=${TOKEN_FILE}
`;
}

/** Prometheus in agent mode (`--enable-feature=agent`): the same scrape, remote write to svc. */
export function prometheusAgentYaml(baseUrl: string): string {
  return `# prometheus --enable-feature=agent --config.file
${SCRAPE}remote_write:
  - url: ${baseUrl}/v1/ingest/prometheus/api/v1/write
    authorization:
      credentials_file: ${TOKEN_FILE}
`;
}

/** An OpenTelemetry Collector (contrib): hostmetrics to svc's OTLP/HTTP endpoint. */
export function otelCollectorYaml(baseUrl: string): string {
  return `receivers:
  hostmetrics:
    collection_interval: 30s
    scrapers: { cpu: {}, memory: {}, filesystem: {}, disk: {}, network: {} }
exporters:
  otlphttp:
    metrics_endpoint: ${baseUrl}/v1/ingest/otlp/v1/metrics
    auth: { authenticator: bearertokenauth }
extensions:
  bearertokenauth:
    filename: ${TOKEN_FILE}
service:
  extensions: [bearertokenauth]
  pipelines:
    metrics: { receivers: [hostmetrics], exporters: [otlphttp] }
`;
}
