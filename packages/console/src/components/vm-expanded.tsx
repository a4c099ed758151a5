import type { EnableExpandedMonitoringResponse } from "@gen/svc/monitoring/v1/monitoring_pb.ts";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../api.ts";
import {
  otelCollectorYaml,
  prometheusAgentYaml,
  tokenFileCommand,
  vmagentFlags,
  vmagentScrapeYaml,
} from "../guest-sender-configs.ts";
import { publicOrigin } from "../pages/connect-tools.tsx";
import { useSession } from "../session.tsx";
import { Button, CopyButton, Dialog, ErrorBanner, Pre, ShownOnce } from "./ui.tsx";

/**
 * "Install expanded monitoring": an explicit, confirmed action. Only the confirm button sends
 * EnableExpandedMonitoring (human-only); opening the page or this dialog sends nothing. The answer's
 * install command and agent token live in the dialog's state until it closes: they are not put in the
 * query cache, storage or the URL, so a reload shows them no more.
 */

/** Where svc offers expanded monitoring (the server checks the distribution too: EXPANDED_UNAVAILABLE). */
export const EXPANDED_LOCATIONS = ["dc-1"];

export function expandedEligible(vm: { location: string; state: string }): boolean {
  return EXPANDED_LOCATIONS.includes(vm.location) && vm.state !== "DELETED";
}

/** The button: opens the page's one ExpandedDialog (a button may unmount once the level changes). */
export function ExpandedButton(props: { reissue: boolean; onOpen: () => void; kind?: "primary" | "plain" }) {
  return (
    <Button kind={props.kind ?? "primary"} onClick={props.onOpen}>
      {props.reissue ? "Issue a new agent token" : "Install expanded monitoring"}
    </Button>
  );
}

/**
 * The confirm dialog and, after it, the command and token. Rendered once by the page, outside the
 * cards, so it stays mounted while the page rereads the VM and its metrics after the change.
 */
export function ExpandedDialog(props: {
  vmName: string;
  displayName: string;
  /** null: closed. reissue: the VM was EXPANDED when opened (a new token stops the previous one). */
  open: { reissue: boolean } | null;
  onClose: () => void;
}) {
  const [result, setResult] = useState<EnableExpandedMonitoringResponse>();
  const queries = useQueryClient();
  const enable = useMutation({
    mutationFn: () => api.monitoring.enableExpandedMonitoring({ name: props.vmName }),
    // Not kept in the mutation cache after the dialog lets go of it.
    gcTime: 0,
    onSuccess: (r) => {
      setResult(r);
      // The level changed: reread the VM and its metrics (reads only).
      void queries.invalidateQueries({ queryKey: ["vm-inventory"] });
      void queries.invalidateQueries({ queryKey: ["vm-monitoring", props.vmName] });
      void queries.invalidateQueries({ queryKey: ["vm-freshness", props.vmName] });
    },
  });
  const close = () => {
    setResult(undefined);
    enable.reset();
    props.onClose();
  };
  const reissue = props.open?.reissue ?? false;
  const title = reissue ? "Issue a new agent token" : "Install expanded monitoring";
  return (
    <Dialog title={title} open={props.open !== null} onClose={close}>
      {result ? (
        <div data-testid="expanded-result">
          <p>
            <strong>{props.displayName}</strong> is now set to expanded monitoring. Nothing has been installed
            yet: choose what sends the guest's metrics, then paste the token below when the commands ask.
          </p>
          <SenderWays installCommand={result.installCommand} />
          <ShownOnce label="Agent token" value={result.agentToken} onDone={close} />
          <p className="muted small">The filesystem chart fills in once the sender's first samples arrive.</p>
        </div>
      ) : (
        <div data-testid="expanded-confirm">
          <p>
            Expanded monitoring adds what only the guest can see — filesystem usage per mountpoint and the
            guest's own memory view — sent from inside the VM by <code>svc-agent</code>, or by the
            node_exporter or OpenTelemetry Collector the guest already runs.
          </p>
          <ul className="vm-confirm-list">
            <li>
              <strong>svc installs nothing and restarts nothing.</strong> Confirming only sets this VM's
              monitoring level to <em>Expanded</em> and issues an agent token.
            </li>
            <li>
              You then run svc-agent's install command shown next inside the guest, as root, or configure
              vmagent, Prometheus in agent mode or an OpenTelemetry Collector with the configuration shown.
            </li>
            <li>
              The agent token is shown <strong>once</strong>; svc keeps only a hash.
              {reissue
                ? " The running agent's token keeps working until the new one is first used, or for 24 hours. To upgrade the agent you need no new token (see the guest agent's docs)."
                : ""}
            </li>
            <li>Available in DC-1 for Debian 12 and Ubuntu 24.04.</li>
          </ul>
          <ErrorBanner error={enable.error} title="Expanded monitoring was not enabled" />
          <div className="row vm-dialog-actions">
            <Button onClick={close}>Cancel</Button>
            <Button kind="primary" busy={enable.isPending} onClick={() => enable.mutate()}>
              {reissue ? "Issue a new token" : "Enable and show the install command"}
            </Button>
          </div>
        </div>
      )}
    </Dialog>
  );
}

type Way = "svc-agent" | "node-exporter" | "otel";

/**
 * The three ways to feed the guest series (docs/agent.md): svc's own agent, node_exporter through
 * vmagent or Prometheus in agent mode, or an OpenTelemetry Collector. Each carries the token by file;
 * the texts are docs/agent.md's (guest-sender-configs.ts).
 */
function SenderWays(props: { installCommand: string }) {
  const [way, setWay] = useState<Way>("svc-agent");
  const { session } = useSession();
  const base = publicOrigin(session.apiOrigin);
  const ways: { key: Way; label: string }[] = [
    { key: "svc-agent", label: "svc-agent" },
    { key: "node-exporter", label: "node_exporter + vmagent or Prometheus agent" },
    { key: "otel", label: "OpenTelemetry Collector" },
  ];
  const block = (title: string, text: string, testId: string) => (
    <>
      <div className="field-label">{title}</div>
      <Pre className="vm-command" testId={testId}>
        {text}
      </Pre>
      <div className="row">
        <CopyButton text={text} label={`Copy ${title.toLowerCase()}`} />
      </div>
    </>
  );
  return (
    <div data-testid="sender-ways">
      <fieldset className="vm-sender-ways">
        <legend>What sends the guest's metrics</legend>
        {ways.map((w) => (
          <label key={w.key}>
            <input
              type="radio"
              name="sender-way"
              value={w.key}
              checked={way === w.key}
              onChange={() => setWay(w.key)}
            />{" "}
            {w.label}
          </label>
        ))}
      </fieldset>
      {way === "svc-agent" ? (
        <div data-testid="way-svc-agent">
          <p className="small">
            Installs svc's guest agent from svc (Debian 12, Ubuntu 24.04); run it as root.
          </p>
          {block("Install command", props.installCommand, "install-command")}
        </div>
      ) : way === "node-exporter" ? (
        <div data-testid="way-node-exporter">
          <p className="small">
            For a guest that runs node_exporter on 127.0.0.1:9100. First the token, into a file the sender
            reads (use the group your vmagent or Prometheus runs as):
          </p>
          {block("Token file command", tokenFileCommand("_victoria-metrics"), "token-file-command")}
          {block("vmagent scrape configuration", vmagentScrapeYaml(), "vmagent-scrape")}
          {block("vmagent flags", vmagentFlags(base), "vmagent-flags")}
          <p className="small">or, with the same keep rule, Prometheus in agent mode:</p>
          {block("Prometheus agent configuration", prometheusAgentYaml(base), "prometheus-agent")}
        </div>
      ) : (
        <div data-testid="way-otel">
          <p className="small">
            An OpenTelemetry Collector (contrib) with the hostmetrics receiver. First the token, into a file
            the Collector reads:
          </p>
          {block("Token file command", tokenFileCommand("otelcol-contrib"), "token-file-command")}
          {block("Collector configuration", otelCollectorYaml(base), "otel-collector")}
        </div>
      )}
    </div>
  );
}
