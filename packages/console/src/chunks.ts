import { createElement, lazy } from "react";

/**
 * The signed-in console's chunks, named once: shell.tsx loads its pages through these, and the sign-in
 * page starts fetching them when the user signs in, alongside the password check, instead of one after
 * the other once the session is there (shell, then page, then the page's data).
 */
export interface Chunk<M> {
  (): Promise<M>;
  /** The module once it has loaded, else undefined: what is here is rendered without suspending. */
  loaded(): M | undefined;
}

function chunk<M>(load: () => Promise<M>): Chunk<M> {
  let promise: Promise<M> | undefined;
  let module: M | undefined;
  const get = () => {
    promise ??= load().then(
      (m) => {
        module = m;
        return m;
      },
      (err: unknown) => {
        promise = undefined; // a failed download is tried again next time
        throw err;
      },
    );
    return promise;
  };
  return Object.assign(get, { loaded: () => module });
}

export const loadShell = chunk(() => import("./shell.tsx"));

export const pages = {
  activity: chunk(() => import("./pages/activity.tsx")),
  alertRules: chunk(() => import("./pages/alert-rules.tsx")),
  ciTrusts: chunk(() => import("./pages/ci-trusts.tsx")),
  connectTools: chunk(() => import("./pages/connect-tools.tsx")),
  destinations: chunk(() => import("./pages/destinations.tsx")),
  incidents: chunk(() => import("./pages/incidents.tsx")),
  keys: chunk(() => import("./pages/keys.tsx")),
  serviceAccounts: chunk(() => import("./pages/service-accounts.tsx")),
  silences: chunk(() => import("./pages/silences.tsx")),
  vm: chunk(() => import("./pages/vm.tsx")),
  vms: chunk(() => import("./pages/vms.tsx")),
};

/**
 * A component from a chunk: rendered at once when the chunk is already here (preloaded at sign-in), else
 * through React.lazy. Suspending on a chunk that has arrived would still hold the page back: React shows
 * a suspended boundary's content no sooner than 300 ms after its fallback.
 */
export function fromChunk<M, P extends object>(
  load: Chunk<M>,
  pick: (m: M) => React.ComponentType<P>,
): React.ComponentType<P> {
  const Lazy = lazy(async () => ({ default: pick(await load()) }));
  // biome-ignore lint/correctness/noComponentHookFactories: called once per page, at module level
  return function FromChunk(props: P) {
    const m = load.loaded();
    if (m) {
      const C = pick(m);
      return createElement(C, props);
    }
    return createElement(Lazy as unknown as React.ComponentType<P>, props);
  };
}

const SECTIONS: Record<string, keyof typeof pages> = {
  activity: "activity",
  alerts: "alertRules",
  "ci-trusts": "ciTrusts",
  connect: "connectTools",
  destinations: "destinations",
  incidents: "incidents",
  keys: "keys",
  "service-accounts": "serviceAccounts",
  silences: "silences",
  vms: "vms",
};

/**
 * Starts downloading the shell and the page that `path` shows (the VM list when it names none); resolves
 * when both are here, or one failed (the lazy import that needs it then tries again and reports it).
 */
export async function preloadFor(path: string): Promise<void> {
  const m = /^\/projects\/[^/]+\/([a-z-]+)(\/.+)?$/.exec(path);
  const section = m ? (SECTIONS[m[1]] ?? "vms") : "vms";
  const page = section === "vms" && m?.[2] ? "vm" : section;
  await Promise.all([loadShell(), pages[page]()]).catch(() => {});
}
