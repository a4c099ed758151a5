/**
 * The signed-in console's chunks, named once: shell.tsx loads its pages through these, and the sign-in
 * page starts fetching them when the user signs in, alongside the password check, instead of one after
 * the other once the session is there (shell, then page, then the page's data).
 */
export const loadShell = () => import("./shell.tsx");

export const pages = {
  alertRules: () => import("./pages/alert-rules.tsx"),
  ciTrusts: () => import("./pages/ci-trusts.tsx"),
  connectTools: () => import("./pages/connect-tools.tsx"),
  destinations: () => import("./pages/destinations.tsx"),
  incidents: () => import("./pages/incidents.tsx"),
  keys: () => import("./pages/keys.tsx"),
  serviceAccounts: () => import("./pages/service-accounts.tsx"),
  vm: () => import("./pages/vm.tsx"),
  vms: () => import("./pages/vms.tsx"),
};

const SECTIONS: Record<string, keyof typeof pages> = {
  alerts: "alertRules",
  "ci-trusts": "ciTrusts",
  connect: "connectTools",
  destinations: "destinations",
  incidents: "incidents",
  keys: "keys",
  "service-accounts": "serviceAccounts",
  vms: "vms",
};

/** Starts downloading the shell and the page that `path` shows (the VM list when it names none). */
export function preloadFor(path: string): void {
  const m = /^\/projects\/[^/]+\/([a-z-]+)(\/.+)?$/.exec(path);
  const section = m ? (SECTIONS[m[1]] ?? "vms") : "vms";
  const page = section === "vms" && m?.[2] ? "vm" : section;
  // A failed preload is retried by the lazy import that needs it, which reports the error.
  loadShell().catch(() => {});
  pages[page]().catch(() => {});
}
