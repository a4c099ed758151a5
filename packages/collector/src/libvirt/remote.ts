import { LibvirtError, RpcConnection } from "./rpc.ts";
import { XdrReader, XdrWriter } from "./xdr.ts";

/** Procedure numbers of remote_protocol.x that the collector calls. */
export const Proc = {
  CONNECT_OPEN: 1,
  CONNECT_CLOSE: 2,
  AUTH_LIST: 66,
  AUTH_POLKIT: 70,
  DOMAIN_GET_METADATA: 265,
  CONNECT_GET_ALL_DOMAIN_STATS: 344,
  DOMAIN_GET_GUEST_INFO: 418,
} as const;

/** virConnectFlags: VIR_CONNECT_RO. */
const CONNECT_RO = 1;
/** remote_auth_type. */
const AUTH_NONE = 0;
const AUTH_POLKIT = 2;
/** virDomainStatsTypes the collector asks for: state, cpu-total, balloon, vcpu, interface, block. */
export const STATS_STATE = 1;
export const STATS_CPU_TOTAL = 2;
export const STATS_BALLOON = 4;
export const STATS_VCPU = 8;
export const STATS_INTERFACE = 16;
export const STATS_BLOCK = 32;
/** virDomainGuestInfoTypes: VIR_DOMAIN_GUEST_INFO_FILESYSTEM. */
export const GUEST_INFO_FILESYSTEM = 16;
/** virDomainMetadataType: VIR_DOMAIN_METADATA_ELEMENT. */
const METADATA_ELEMENT = 2;
/** virErrorNumber: VIR_ERR_NO_DOMAIN_METADATA. */
export const ERR_NO_DOMAIN_METADATA = 80;

/** Bounds from remote_protocol.x, so a corrupt reply cannot make the decoder allocate without limit. */
const MAX_DOMAINS = 16384;
const MAX_PARAMS = 262144;

export interface DomainRef {
  readonly name: string;
  /** 16 raw bytes. */
  readonly uuid: Buffer;
  /** Running domain's id, -1 when inactive. */
  readonly id: number;
}

export type TypedValue = number | bigint | boolean | string;

export interface DomainStatsRecord {
  readonly domain: DomainRef;
  /** libvirt's typed parameters by field name ("cpu.time", "block.0.rd.bytes", …). */
  readonly params: ReadonlyMap<string, TypedValue>;
}

export function uuidString(b: Buffer): string {
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function readDomain(r: XdrReader): DomainRef {
  const name = r.string(4096);
  const uuid = Buffer.from(r.fixedOpaque(16));
  const id = r.int();
  return { name, uuid, id };
}

function writeDomain(w: XdrWriter, d: DomainRef): void {
  w.string(d.name).fixedOpaque(d.uuid).int(d.id);
}

/** remote_typed_param<>: field name, then a union discriminated by virTypedParameterType (1…7). */
export function readTypedParams(r: XdrReader): Map<string, TypedValue> {
  const n = r.count(MAX_PARAMS, "typed parameters");
  const out = new Map<string, TypedValue>();
  for (let i = 0; i < n; i++) {
    const field = r.string(80);
    const type = r.int();
    let v: TypedValue;
    switch (type) {
      case 1: // INT
        v = r.int();
        break;
      case 2: // UINT
        v = r.uint();
        break;
      case 3: // LLONG
        v = r.hyper();
        break;
      case 4: // ULLONG
        v = r.uhyper();
        break;
      case 5: // DOUBLE
        v = r.double();
        break;
      case 6: // BOOLEAN
        v = r.int() !== 0;
        break;
      case 7: // STRING
        v = r.string(4 * 1024 * 1024);
        break;
      default:
        throw new LibvirtError(`typed parameter ${field} has unknown type ${type}`);
    }
    out.set(field, v);
  }
  return out;
}

/** remote_connect_get_all_domain_stats_ret: records of (domain, typed params). */
export function decodeAllDomainStats(body: Buffer): DomainStatsRecord[] {
  const r = new XdrReader(body);
  const n = r.count(MAX_DOMAINS, "domain stats records");
  const out: DomainStatsRecord[] = [];
  for (let i = 0; i < n; i++) {
    const domain = readDomain(r);
    out.push({ domain, params: readTypedParams(r) });
  }
  return out;
}

export interface LibvirtClientOptions {
  /** libvirtd's unix socket, e.g. /var/run/libvirt/libvirt-sock (or libvirt-sock-ro). */
  readonly socketPath: string;
  /** The driver URI to open on it, e.g. qemu:///system. */
  readonly uri: string;
  readonly readOnly: boolean;
  readonly timeoutMs: number;
}

/**
 * The collector's view of libvirt's remote protocol: open a connection (authenticating as the socket
 * requires: none, or polkit, which grants root and the socket's group), then bulk stats, a domain's
 * metadata element, and the guest agent's filesystem info.
 */
export class LibvirtClient {
  readonly #rpc: RpcConnection;

  private constructor(rpc: RpcConnection) {
    this.#rpc = rpc;
  }

  static async connect(o: LibvirtClientOptions): Promise<LibvirtClient> {
    const rpc = await RpcConnection.open(o.socketPath, o.timeoutMs);
    try {
      const auth = new XdrReader(await rpc.call(Proc.AUTH_LIST));
      const n = auth.count(20, "auth types");
      const types = Array.from({ length: n }, () => auth.int());
      if (types.length > 0 && !types.includes(AUTH_NONE)) {
        if (!types.includes(AUTH_POLKIT)) {
          throw new LibvirtError(
            `libvirt asks for authentication types ${types.join(", ")}; only none and polkit are supported`,
          );
        }
        await rpc.call(Proc.AUTH_POLKIT);
      }
      await rpc.call(
        Proc.CONNECT_OPEN,
        new XdrWriter()
          .optionalString(o.uri)
          .uint(o.readOnly ? CONNECT_RO : 0)
          .bytes(),
      );
      return new LibvirtClient(rpc);
    } catch (err) {
      rpc.close();
      throw err;
    }
  }

  get closed(): boolean {
    return this.#rpc.closed;
  }

  /** Every domain (active and inactive) in one call: virConnectGetAllDomainStats(stats, flags 0). */
  async getAllDomainStats(stats: number): Promise<DomainStatsRecord[]> {
    const body = new XdrWriter().uint(0).uint(stats).uint(0).bytes();
    return decodeAllDomainStats(await this.#rpc.call(Proc.CONNECT_GET_ALL_DOMAIN_STATS, body));
  }

  /** The domain's metadata element in namespace `uri`, or undefined when it has none. */
  async getMetadata(domain: DomainRef, uri: string): Promise<string | undefined> {
    const w = new XdrWriter();
    writeDomain(w, domain);
    w.int(METADATA_ELEMENT).optionalString(uri).uint(0);
    try {
      return new XdrReader(await this.#rpc.call(Proc.DOMAIN_GET_METADATA, w.bytes())).string();
    } catch (err) {
      if (err instanceof LibvirtError && err.code === ERR_NO_DOMAIN_METADATA) return undefined;
      throw err;
    }
  }

  /** virDomainGetGuestInfo(types): answered by the QEMU guest agent; needs a read-write connection. */
  async getGuestInfo(domain: DomainRef, types: number, timeoutMs?: number): Promise<Map<string, TypedValue>> {
    const w = new XdrWriter();
    writeDomain(w, domain);
    w.uint(types).uint(0);
    return readTypedParams(
      new XdrReader(await this.#rpc.call(Proc.DOMAIN_GET_GUEST_INFO, w.bytes(), timeoutMs)),
    );
  }

  close(): void {
    this.#rpc.call(Proc.CONNECT_CLOSE, undefined, 1000).catch(() => {});
    setImmediate(() => this.#rpc.close());
  }
}
