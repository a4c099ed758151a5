import type { EnableExpandedMonitoringResponse } from "@gen/svc/monitoring/v1/monitoring_pb.ts";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../api.ts";
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
            yet: run this command in the guest as root, then paste the token below when it asks.
          </p>
          <div className="field-label">Install command</div>
          <Pre className="vm-command" testId="install-command">
            {result.installCommand}
          </Pre>
          <div className="row">
            <CopyButton text={result.installCommand} label="Copy command" />
          </div>
          <ShownOnce label="Agent token" value={result.agentToken} onDone={close} />
          <p className="muted small">The filesystem chart fills in once the agent sends its first samples.</p>
        </div>
      ) : (
        <div data-testid="expanded-confirm">
          <p>
            Expanded monitoring adds what only the guest can see — filesystem usage per mountpoint and the
            guest's own memory view — reported by <code>svc-agent</code> running inside the VM.
          </p>
          <ul className="vm-confirm-list">
            <li>
              <strong>svc installs nothing and restarts nothing.</strong> Confirming only sets this VM's
              monitoring level to <em>Expanded</em> and issues an agent token.
            </li>
            <li>You then run the install command shown next inside the guest, as root.</li>
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
