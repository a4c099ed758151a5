import type { Incident } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { api } from "./api.ts";

/** Pages read at most: open incidents are few; past this the counts say "or more". */
const MAX_PAGES = 10;

/**
 * What the counts count (issue 43, item 2; docs/console.md#alerts-beside-the-metrics): every incident
 * here is open (firing). `firing` holds those nobody acknowledged yet, shown as "unacknowledged" in the
 * navigation's badge and in the VM list; `acknowledged` the others. Both views read this one query, and
 * an acknowledgement in the console refreshes it at once.
 */
export interface OpenIncidents {
  /** Open incidents nobody acknowledged yet: "unacknowledged". */
  readonly firing: Incident[];
  readonly acknowledged: Incident[];
  /** More open incidents exist than were read. */
  readonly truncated: boolean;
}

/**
 * The project's open incidents, split into unattended (firing) and acknowledged (issue 27, item 7): the
 * VM list shows them per VM and the navigation a count. One cached query shared by both.
 */
export function useOpenIncidents(projectName: string) {
  return useQuery({
    queryKey: ["open-incidents", projectName],
    refetchInterval: 30_000,
    queryFn: async (): Promise<OpenIncidents> => {
      const all: Incident[] = [];
      let pageToken = "";
      let pages = 0;
      do {
        const r = await api.incidents.listIncidents({ projectName, state: "OPEN", pageSize: 50, pageToken });
        all.push(...r.incidents);
        pageToken = r.nextPageToken ?? "";
      } while (pageToken && ++pages < MAX_PAGES);
      return {
        firing: all.filter((i) => !i.acknowledgedBy),
        acknowledged: all.filter((i) => !!i.acknowledgedBy),
        truncated: !!pageToken,
      };
    },
  });
}

/**
 * Open incidents of one VM: unattended and acknowledged counts, and how many of them a silence mutes now
 * (the API's `silencedBy`, the rule the dispatcher applies).
 */
export function incidentsOfVm(open: OpenIncidents | undefined, vmName: string) {
  if (!open) return undefined;
  const mine = (l: Incident[]) => l.filter((i) => i.vmName === vmName);
  return {
    firing: mine(open.firing).length,
    acknowledged: mine(open.acknowledged).length,
    silenced: [...mine(open.firing), ...mine(open.acknowledged)].filter((i) => i.silencedBy.length > 0)
      .length,
  };
}
