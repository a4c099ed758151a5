import { Link } from "wouter";
import { CopyButton, Page, Pre } from "../components/ui.tsx";
import { scrapeConfigYaml } from "../scrape-config.ts";
import { useProject, useSession } from "../session.tsx";

/**
 * "Connect your tools": the Prometheus-compatible query base URL for Grafana (docs/grafana.md) and a
 * scrape configuration for the customer's own Prometheus (docs/prometheus.md), with this server's origin
 * and this project filled in. Nothing here calls an RPC; credentials are made on the keys page.
 */

/**
 * The server's public origin. A server started on PORT=0 without SVC_BASE_URL reports the port it was
 * asked for (":0"), which nobody can reach; the page's own origin is then the honest answer.
 */
export function publicOrigin(apiOrigin: string | undefined): string {
  try {
    const u = new URL(apiOrigin ?? "");
    if (u.port === "0" || !/^https?:$/.test(u.protocol)) return window.location.origin;
    return u.origin;
  } catch {
    return window.location.origin;
  }
}

export function ConnectToolsPage() {
  const project = useProject();
  const { session } = useSession();
  const origin = publicOrigin(session.apiOrigin);
  const url = new URL(origin);
  const queryBase = `${origin}/v1/monitoring/projects/${project.id}/prometheus`;
  const discovery = `${origin}/v1/monitoring/projects/${project.id}/scrape-targets`;
  const exportPath = `/v1/monitoring/projects/${project.id}/export`;

  const provisioning = `apiVersion: 1
datasources:
  - name: svc (${project.id})
    type: prometheus
    access: proxy
    url: ${queryBase}
    jsonData:
      httpMethod: POST
      timeInterval: 30s
      queryTimeout: 10s
      prometheusType: Prometheus
      prometheusVersion: 3.5.0
      httpHeaderName1: Authorization
    secureJsonData:
      httpHeaderValue1: Bearer svcs_REPLACE_ME
`;

  const scrapeConfig = scrapeConfigYaml(discovery);

  const discoveryAnswer = `[
  {
    "targets": ["${url.host}"],
    "labels": {
      "__scheme__": "${url.protocol.replace(":", "")}",
      "__metrics_path__": "${exportPath}",
      "__param_shard": "0",
      "svc_shard": "0"
    }
  },
  …one group per export shard
]`;

  const check = `curl -s -H "Authorization: Bearer $READ_KEY" \\
  '${queryBase}/api/v1/query?query=up'`;

  return (
    <Page
      title="Connect your tools"
      subtitle={
        <>
          Read <code>{project.name}</code>'s VM metrics from Grafana or scrape them into your own Prometheus.
          Both need a key with <code>monitoring.read</code> only.
        </>
      }
    >
      <section className="card" aria-label="Credential">
        <h2>1. A read-only key</h2>
        <p>
          Create a service account from the <strong>Metrics scraper</strong> template on the{" "}
          <Link href="/service-accounts">Service accounts</Link> page, then a key for it on the{" "}
          <Link href="/keys">API keys</Link> page. The secret (<code>svcs_…</code>) is shown once: keep it in
          Grafana or in a file only Prometheus can read, never in a URL.
        </p>
      </section>

      <section className="card" aria-label="Grafana">
        <h2>2. Grafana</h2>
        <p className="muted">
          svc serves a read-only, tenant-scoped Prometheus HTTP API, so Grafana's built-in{" "}
          <strong>Prometheus</strong> data source works unchanged. Query base URL:
        </p>
        <div className="connect-url">
          <code data-testid="query-base-url">{queryBase}</code>
          <CopyButton text={queryBase} label="Copy URL" />
        </div>
        <ol className="connect-steps">
          <li>
            <em>Connections → Data sources → Add data source → Prometheus.</em>
          </li>
          <li>
            <strong>Prometheus server URL:</strong> the base URL above (without <code>/api/v1</code>).
          </li>
          <li>
            <strong>Authentication:</strong> No Authentication; under <strong>HTTP headers</strong> add{" "}
            <code>Authorization</code> with the value <code>Bearer svcs_…</code> (your read key). Keep{" "}
            <em>Access</em> on <em>Server</em>: Grafana adds the header server-side, browsers never see it.
          </li>
          <li>
            <strong>Performance:</strong> Prometheus type <em>Prometheus</em>, version{" "}
            <code>&gt; 2.50.x</code>. <strong>Other:</strong> HTTP method <code>POST</code>, scrape interval{" "}
            <code>30s</code>, query timeout <code>10s</code>.
          </li>
          <li>
            <strong>Save &amp; test.</strong> Panels read at most 10,000 points per series and 4 MiB per
            answer.
          </li>
        </ol>
        <details>
          <summary>Provisioned data source (provisioning/datasources/svc.yaml)</summary>
          <div className="connect-pre">
            <Pre testId="grafana-provisioning">{provisioning}</Pre>
            <CopyButton text={provisioning} />
          </div>
        </details>
        <p className="muted small">Check the key and the URL from a shell:</p>
        <div className="connect-pre">
          <Pre>{check}</Pre>
          <CopyButton text={check} />
        </div>
      </section>

      <section className="card" aria-label="Prometheus">
        <h2>3. Your own Prometheus</h2>
        <p className="muted">
          HTTP service discovery lists a fixed number of export shards for the project, so the target list
          never changes as VMs come and go. Each shard serves the newest sample of its series with the
          sample's original timestamp — hence <code>honor_timestamps: true</code>. Put the read key in{" "}
          <code>/etc/prometheus/svc-token</code>.
        </p>
        <div className="connect-url">
          <code data-testid="discovery-url">{discovery}</code>
          <CopyButton text={discovery} label="Copy URL" />
        </div>
        <div className="connect-pre">
          <Pre testId="scrape-config">{scrapeConfig}</Pre>
          <CopyButton text={scrapeConfig} />
        </div>
        <p className="muted small">
          Discovery answers one target group per shard; Prometheus then scrapes{" "}
          <code>{exportPath}?shard=N</code> with the same key:
        </p>
        <Pre testId="discovery-answer">{discoveryAnswer}</Pre>
        <p className="muted small">
          For full-resolution history use the query API above: a scrape only sees the newest sample per
          series.
        </p>
      </section>
    </Page>
  );
}
