import type { Incident } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { useMutation } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../api.ts";
import { fmtTime } from "../format.ts";
import { Button, Dialog, ErrorBanner, Field } from "./ui.tsx";

/** The server refuses a snooze more than 30 days ahead (alerts/incidents.ts MAX_SNOOZE_MS). */
const MAX_SNOOZE_MS = 30 * 86_400_000;

const PRESETS = [
  { hours: 1, label: "1 hour" },
  { hours: 4, label: "4 hours" },
  { hours: 24, label: "24 hours" },
];

/** "2026-11-25T14:30" in the browser's zone, for <input type="datetime-local">. */
function localInput(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/**
 * Snooze: notifications for this incident are skipped until the chosen time (evaluation goes on, and a
 * repeat that falls due meanwhile is skipped, not sent later). 1 h, 4 h, 24 h or a time of one's own.
 */
export function IncidentSnoozeDialog(props: {
  open: boolean;
  incident: Incident;
  onClose: () => void;
  onSnoozed: (i: Incident) => void;
}) {
  const [custom, setCustom] = useState("");
  const [invalid, setInvalid] = useState<string>();
  const snooze = useMutation({
    mutationFn: (untilMs: number) =>
      api.incidents.snoozeIncident({
        name: props.incident.name,
        snoozeUntilUnix: BigInt(Math.floor(untilMs / 1000)),
      }),
    onSuccess: (i) => {
      setCustom("");
      props.onSnoozed(i);
    },
  });
  const submitCustom = () => {
    const ms = custom ? new Date(custom).getTime() : Number.NaN;
    const now = Date.now();
    if (Number.isNaN(ms)) return setInvalid("Choose a date and time.");
    if (ms <= now) return setInvalid("Choose a time in the future.");
    if (ms > now + MAX_SNOOZE_MS) return setInvalid("A snooze can last at most 30 days.");
    setInvalid(undefined);
    snooze.mutate(ms);
  };
  const now = Date.now();
  return (
    <Dialog
      title="Snooze notifications"
      open={props.open}
      onClose={() => {
        snooze.reset();
        setInvalid(undefined);
        props.onClose();
      }}
    >
      <div className="snooze" data-testid="snooze-dialog">
        <p className="muted">
          No destination is notified about this incident until the snooze ends. Evaluation continues: the
          incident still resolves when the VM recovers. Messages that fall due meanwhile are skipped, not sent
          later.
        </p>
        <ErrorBanner error={snooze.error} title="Could not snooze" />
        <div className="row snooze-presets">
          {PRESETS.map((p) => (
            <Button
              key={p.hours}
              kind="primary"
              disabled={snooze.isPending}
              onClick={() => snooze.mutate(Date.now() + p.hours * 3_600_000)}
              title={`until ${fmtTime(Math.floor((now + p.hours * 3_600_000) / 1000))}`}
            >
              {p.label}
            </Button>
          ))}
        </div>
        <form
          className="snooze-custom"
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            submitCustom();
          }}
        >
          <Field label="Or until" hint="In your browser's time zone; at most 30 days ahead." error={invalid}>
            <input
              type="datetime-local"
              value={custom}
              min={localInput(now)}
              max={localInput(now + MAX_SNOOZE_MS)}
              onChange={(e) => {
                setCustom(e.target.value);
                setInvalid(undefined);
              }}
            />
          </Field>
          <Button type="submit" busy={snooze.isPending}>
            Snooze until then
          </Button>
        </form>
      </div>
    </Dialog>
  );
}
