import { type DomainRef, uuidString } from "./libvirt/remote.ts";

/**
 * Which svc VM a libvirt domain is: the provider's provisioning writes a metadata element into the
 * domain XML,
 *
 *   <metadata><svc:vm xmlns:svc="urn:svc:collector:1" name="projects/acme/locations/dc-1/vms/web-1"/></metadata>
 *
 * (virsh metadata DOMAIN urn:svc:collector:1 --key svc --set '<vm name="…"/>'). A domain without it, or
 * with a name that is not a VM name, maps to nothing and is skipped, never guessed.
 */
export const METADATA_NAMESPACE = "urn:svc:collector:1";

const VM_NAME =
  /^projects\/[a-z0-9][a-z0-9-]{0,62}\/locations\/[a-z0-9][a-z0-9-]{0,62}\/vms\/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** The VM name in a metadata element as libvirt returns it, or undefined (with why). */
export function vmNameFromMetadata(xml: string): { vm?: string; problem?: string } {
  const m = /<(?:[A-Za-z_][\w.-]*:)?vm\b[^>]*\bname\s*=\s*(["'])([^"']*)\1/.exec(xml);
  if (!m) return { problem: "the metadata element has no name attribute" };
  const name = m[2].trim();
  if (!VM_NAME.test(name))
    return {
      problem: `name ${JSON.stringify(name.slice(0, 200))} is not projects/<p>/locations/<l>/vms/<id>`,
    };
  return { vm: name };
}

interface Entry {
  readonly vm: string | undefined;
  readonly problem: string | undefined;
  readonly readAtMs: number;
}

/**
 * Caches each domain's mapping by UUID, so the metadata is read once per domain and again only every
 * `refreshMs` (a provider that adds or changes the element is picked up within that), not per cycle.
 */
export class IdentityCache {
  readonly #entries = new Map<string, Entry>();
  readonly #refreshMs: number;

  constructor(refreshMs: number) {
    this.#refreshMs = refreshMs;
  }

  /** The cached mapping if fresh, else undefined (the caller reads the metadata and calls set). */
  get(domain: DomainRef, nowMs: number): Entry | undefined {
    const e = this.#entries.get(uuidString(domain.uuid));
    return e && nowMs - e.readAtMs < this.#refreshMs ? e : undefined;
  }

  set(domain: DomainRef, metadata: string | undefined, nowMs: number): Entry {
    const r =
      metadata === undefined
        ? { problem: `no <vm> element in namespace ${METADATA_NAMESPACE}` }
        : vmNameFromMetadata(metadata);
    const e: Entry = { vm: r.vm, problem: r.problem, readAtMs: nowMs };
    this.#entries.set(uuidString(domain.uuid), e);
    return e;
  }

  /** Forgets domains not seen in the latest listing (undefined ones). */
  retain(uuids: ReadonlySet<string>): void {
    for (const k of this.#entries.keys()) if (!uuids.has(k)) this.#entries.delete(k);
  }
}
