/**
 * The scrape configuration "Connect your tools" shows for the customer's own Prometheus
 * (docs/prometheus.md): the suggested 60 s interval and 10 s timeout, and honor_timestamps, without which
 * Prometheus stamps old (buffered) observations with the scrape time. A plain function, so a test holds
 * it equal to the docs' block and has `promtool check config` accept it (test/scrape-config.test.ts).
 */
export function scrapeConfigYaml(discoveryUrl: string): string {
  return `scrape_configs:
  - job_name: svc
    # Required: without it Prometheus stamps old (buffered) observations with the scrape time.
    honor_timestamps: true
    scrape_interval: 60s
    scrape_timeout: 10s
    authorization:
      type: Bearer
      credentials_file: /etc/prometheus/svc-token
    http_sd_configs:
      - url: ${discoveryUrl}
        refresh_interval: 5m
        authorization:
          type: Bearer
          credentials_file: /etc/prometheus/svc-token
`;
}
