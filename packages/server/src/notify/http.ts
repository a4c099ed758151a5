import { lookup as dnsLookup } from "node:dns";
import type { ClientRequest } from "node:http";
import { Agent, request } from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { createSecureContext, type SecureContext } from "node:tls";
import { invalidArgument } from "../errors.ts";

/**
 * The one outbound HTTP client of notifications: a JSON POST to a webhook or chat URL, guarded
 * against SSRF (docs/notifications.md#where-svc-may-send-ssrf). HTTPS only; no redirects followed (a 3xx comes back as a response and
 * the caller counts it as a failure); one deadline covers connect, TLS, request and response; at most
 * 64 KiB of the answer is read. Every address the host resolves to is checked when the socket
 * connects, inside the `lookup` of the connection pool's agent, so a name that resolves to a public
 * address at save time and to 127.0.0.1 later (DNS rebinding) is still refused. Connections are kept
 * alive (a TLS handshake per delivery was most of the dispatcher's CPU) in pools that never mix
 * options; closeIdleConnections() ends them.
 */

export type HttpOutcome =
  | {
      readonly kind: "response";
      readonly status: number;
      /** From Retry-After (delta seconds or an HTTP date), when present and valid. */
      readonly retryAfterSeconds?: number;
      /** The first RESPONSE_HEAD_BYTES of the body as text (PagerDuty's and Opsgenie's errors say why). */
      readonly head?: string;
      readonly durationMs: number;
    }
  | {
      readonly kind: "error";
      /**
       * Why no response came, as the library said it, for the operator's log: never a header value, nor
       * the URL's path or query (chat URLs are secrets), but it may say what answered on the port (a TLS
       * library's text), so it is not shown to tenants.
       */
      readonly error: string;
      /** The class of failure a tenant is shown ({@link failureReason}). */
      readonly reason: string;
      readonly durationMs: number;
    };

/** A resolved address, as dns.lookup returns it with `all: true`. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: number;
}

/** Resolves a host name to all its addresses (dns.lookup with `all: true` by default). */
export type ResolveHost = (hostname: string) => Promise<readonly ResolvedAddress[]>;

export interface PostJsonOptions {
  /** Deadline of the whole exchange, ms. */
  readonly timeoutMs: number;
  /** Host names or IP addresses allowed although special (loopback, private): tests and the demo. */
  readonly allowHosts?: readonly string[];
  /** Extra trusted CA certificates (PEM), for a test receiver's self-made certificate. */
  readonly ca?: string | Buffer;
  /** Name resolution; tests hand in a fixed table. */
  readonly lookup?: ResolveHost;
}

/** Bytes of the answer read at most; the status is all the caller uses. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

const systemResolve: ResolveHost = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

/** A URL svc does not send to; its message is svc's own and says why. */
class InvalidUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidUrlError";
  }
}

/** The request's deadline: destroys the request with this. */
class DeadlineError extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms} ms`);
    this.name = "DeadlineError";
  }
}

/** Thrown (inside the request's lookup too) when an address is refused; its message is the reason. */
class RefusedAddressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RefusedAddressError";
  }
}

export async function postJson(
  url: string,
  body: string,
  headers: Readonly<Record<string, string>>,
  opts: PostJsonOptions,
): Promise<HttpOutcome> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  // What an error message must not repeat; only needed when there is an error.
  const secrets = () => secretsOf(url, headers);

  let target: Target;
  let pool: Pool;
  try {
    target = cachedTarget(url);
    pool = poolFor(opts);
    // An IP literal never reaches `lookup` (net.connect skips it), so it is checked here.
    if (target.ip && !pool.passedIps.has(target.ip)) {
      if (!pool.allow.host(target.host)) refuseIfSpecial(target.ip, pool.allow);
      // The outcome depends only on the address and the pool's allowlist: remembered when it passed.
      if (pool.passedIps.size >= MAX_CACHED_TARGETS) pool.passedIps.clear();
      pool.passedIps.add(target.ip);
    }
  } catch (e) {
    return { kind: "error", ...errorOf(e, secrets()), durationMs: elapsed() };
  }

  return new Promise<HttpOutcome>((settle) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let status: number | undefined;
    let retryAfterSeconds: number | undefined;
    let head: Buffer[] = [];
    let headBytes = 0;
    let current: ClientRequest | undefined;
    const finish = (o: HttpOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      settle(o);
    };
    const fail = (e: unknown) => {
      // Once the status line is in, the endpoint has answered: a stalled or cut body changes nothing.
      if (status !== undefined) respond();
      else finish({ kind: "error", ...errorOf(e, secrets()), durationMs: elapsed() });
    };
    const respond = () =>
      finish({
        kind: "response",
        status: status!,
        ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
        ...(headBytes > 0
          ? { head: Buffer.concat(head).subarray(0, RESPONSE_HEAD_BYTES).toString("utf8") }
          : {}),
        durationMs: elapsed(),
      });

    const send = (fresh: boolean) => {
      let req: ClientRequest;
      try {
        req = request({
          method: "POST",
          host: target.host,
          port: target.port,
          path: target.path,
          headers: {
            "content-type": "application/json",
            "user-agent": "svc-notify/1",
            ...headers,
            "content-length": String(Buffer.byteLength(body)),
          },
          // The pool's agent, or a one-off socket for the retry below. Its lookup and TLS context
          // are the pool's either way (the agent's own options win over these for pooled sockets).
          agent: fresh ? false : pool.agent,
          lookup: pool.lookup,
          ...(pool.secureContext ? { secureContext: pool.secureContext } : {}),
          ...(target.ip ? {} : { servername: target.host }),
        });
      } catch (e) {
        // Invalid header names or values throw synchronously.
        finish({ kind: "error", ...errorOf(e, secrets()), durationMs: elapsed() });
        return;
      }
      current = req;

      req.on("error", (e: unknown) => {
        if (req !== current || done) return;
        // A kept-alive socket the server has just closed (its idle timeout racing our reuse) fails
        // with ECONNRESET / "socket hang up" before any byte of a response. Retried once, at once,
        // on a new socket: the server closed that connection without reading the request, so it
        // never reached the endpoint's application, and a delivery is at-least-once anyway should
        // it have. Not retried on a new socket, after a response began, or on the deadline (that
        // error has no code).
        if (!fresh && req.reusedSocket && status === undefined && isStaleSocketError(e)) {
          send(true);
          return;
        }
        fail(e);
      });
      req.on("response", (res) => {
        status = res.statusCode ?? 0;
        const ra = res.headers["retry-after"];
        retryAfterSeconds = ra === undefined ? undefined : parseRetryAfter(ra, Date.now());
        // The body is read to its end (the socket then goes back to the pool) or, past
        // MAX_RESPONSE_BYTES, the socket is destroyed: it never returns with unread bytes.
        let read = 0;
        head = [];
        headBytes = 0;
        res.on("data", (chunk: Buffer) => {
          if (headBytes < RESPONSE_HEAD_BYTES) {
            head.push(chunk);
            headBytes += chunk.length;
          }
          read += chunk.length;
          if (read >= MAX_RESPONSE_BYTES) {
            respond();
            res.destroy();
          }
        });
        res.on("end", respond);
        res.on("error", fail);
        res.on("close", respond);
      });
      req.end(body);
    };

    send(false);
    if (done) return;
    // One deadline for the whole exchange, the retry included; destroying the request destroys its
    // socket, so a timed-out socket is never reused.
    timer = setTimeout(() => {
      current?.destroy(new DeadlineError(opts.timeoutMs));
    }, opts.timeoutMs);
  });
}

/**
 * Destroys every pooled connection (and the agents holding them); the app calls it on shutdown.
 * Later posts open new connections.
 */
export function closeIdleConnections(): void {
  for (const p of pools.values()) p.agent.destroy();
  pools.clear();
  lastPool = undefined;
}

// ---- connection pools -----------------------------------------------------------------------------

/** Sockets per pool (host:port) at most; the dispatcher sends one delivery at a time per destination. */
const POOL_MAX_SOCKETS = 16;
/** Idle sockets are closed after this, below the usual 5 s keep-alive timeout of servers. */
const POOL_IDLE_MS = 4_000;
const POOL_KEEPALIVE_MSECS = 1_000;

interface Pool {
  readonly agent: Agent;
  readonly allow: AllowList;
  readonly lookup: LookupFunction;
  readonly secureContext?: SecureContext;
  /** IP-literal hosts already checked against this pool's allowlist and found allowed or ordinary. */
  readonly passedIps: Set<string>;
}

/**
 * One keep-alive agent per set of options that decides which connections may be trusted: the CA,
 * the allowHosts list and the resolver. Different options never share a socket: a socket opened
 * under an allowlist that admits 127.0.0.1 is never handed to a request whose allowlist does not.
 */
const pools = new Map<string, Pool>();
/** TLS contexts by CA text: the CA (Node's roots plus one, ~200 KB) is parsed once, not per connection. */
const secureContexts = new Map<string, { readonly id: number; readonly context: SecureContext }>();
const resolverIds = new WeakMap<ResolveHost, number>();
let lastId = 0;

/**
 * The pool of the last call's options: the app passes the same CA string, allowlist and resolver on
 * every call. The allowlist is compared by value (a copy), so a list changed in place since is never
 * given the old list's pool; a Buffer CA always takes the keyed path.
 */
let lastPool:
  | {
      readonly ca: string | undefined;
      readonly lookup: ResolveHost | undefined;
      readonly hosts: readonly string[];
      readonly pool: Pool;
    }
  | undefined;

function poolFor(opts: PostJsonOptions): Pool {
  const last = lastPool;
  const hosts = opts.allowHosts ?? [];
  if (
    last !== undefined &&
    last.ca === opts.ca &&
    last.lookup === opts.lookup &&
    last.hosts.length === hosts.length &&
    last.hosts.every((h, i) => h === hosts[i])
  )
    return last.pool;
  const pool = keyedPool(opts);
  lastPool =
    typeof opts.ca === "string" || opts.ca === undefined
      ? { ca: opts.ca, lookup: opts.lookup, hosts: [...hosts], pool }
      : undefined;
  return pool;
}

function keyedPool(opts: PostJsonOptions): Pool {
  const resolve = opts.lookup ?? systemResolve;
  let resolverId = resolverIds.get(resolve);
  if (resolverId === undefined) {
    resolverId = ++lastId;
    resolverIds.set(resolve, resolverId);
  }
  let tls: { readonly id: number; readonly context: SecureContext } | undefined;
  if (opts.ca !== undefined) {
    const caText = typeof opts.ca === "string" ? opts.ca : opts.ca.toString("latin1");
    tls = secureContexts.get(caText);
    if (!tls) {
      tls = { id: ++lastId, context: createSecureContext({ ca: opts.ca }) };
      secureContexts.set(caText, tls);
    }
  }
  const hosts = opts.allowHosts ?? [];
  const key = `${tls?.id ?? 0} ${resolverId} ${JSON.stringify([...hosts].sort())}`;
  let pool = pools.get(key);
  if (!pool) {
    const allow = allowList(hosts);
    const lookup = guardedLookup(allow, resolve);
    pool = {
      allow,
      lookup,
      passedIps: new Set(),
      ...(tls ? { secureContext: tls.context } : {}),
      // The SSRF check stays on the address actually connected: `lookup` is the agent's own, so it
      // runs for every NEW socket at connect time (a name that now resolves to a refused address
      // fails there); a reused socket is one that was checked when it was opened, and its peer
      // address cannot change. IP literals are checked in postJson before every request.
      agent: new Agent({
        keepAlive: true,
        keepAliveMsecs: POOL_KEEPALIVE_MSECS,
        maxSockets: POOL_MAX_SOCKETS,
        // On a free socket, the agent's timeout closes it after this much idleness.
        timeout: POOL_IDLE_MS,
        scheduling: "lifo",
        lookup,
        ...(tls ? { secureContext: tls.context } : {}),
      }),
    };
    pools.set(key, pool);
  }
  return pool;
}

function isStaleSocketError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "EPIPE";
}

/**
 * net.connect's `lookup`: resolves with `resolve` and refuses the connection when any address of a
 * host that is not allowlisted is special, so every address a socket connects to has been checked.
 */
function guardedLookup(allow: AllowList, resolve: ResolveHost): LookupFunction {
  const lookup = (
    hostname: string,
    options: { family?: number | string; all?: boolean },
    callback: (err: Error | null, address: string | ResolvedAddress[], family?: number) => void,
  ) => {
    resolve(hostname)
      .then((addresses) => {
        if (addresses.length === 0)
          throw Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" });
        if (!allow.host(hostname)) for (const a of addresses) refuseIfSpecial(a.address, allow, hostname);
        const family =
          options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : Number(options.family ?? 0);
        const usable =
          family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
        if (usable.length === 0)
          throw Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: "ENOTFOUND" });
        if (options.all)
          callback(
            null,
            usable.map((a) => ({ address: a.address, family: a.family })),
          );
        else callback(null, usable[0].address, usable[0].family);
      })
      .catch((e: unknown) => callback(e instanceof Error ? e : new Error(String(e)), ""));
  };
  return lookup as unknown as LookupFunction;
}

/**
 * Save-time check of a destination URL: https, no credentials, and a host that is allowed or whose
 * every address is an ordinary public one. Throws invalidArgument("url", why).
 */
export async function checkDestinationUrl(
  url: string,
  allowHosts: readonly string[],
  opts: { lookup?: ResolveHost } = {},
): Promise<void> {
  const allow = allowList(allowHosts);
  let target: Target;
  try {
    target = parseTarget(url);
  } catch (e) {
    throw invalidArgument("url", (e as Error).message);
  }
  if (allow.host(target.host)) return;
  if (target.ip) {
    const why = specialAddressReason(target.ip);
    if (why && !allow.address(target.ip)) throw invalidArgument("url", refusal(target.ip, why));
    return;
  }
  let addresses: readonly ResolvedAddress[];
  try {
    addresses = await (opts.lookup ?? systemResolve)(target.host);
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw invalidArgument("url", `host ${target.host} does not resolve${code ? ` (${code})` : ""}`);
  }
  if (addresses.length === 0) throw invalidArgument("url", `host ${target.host} has no address`);
  for (const a of addresses) {
    const why = specialAddressReason(a.address);
    if (why && !allow.address(a.address)) throw invalidArgument("url", refusal(a.address, why, target.host));
  }
}

/** Seconds to wait from a Retry-After value (delta seconds or HTTP date); undefined when unparsable. */
export function parseRetryAfter(value: string, nowMs: number): number | undefined {
  const v = value.trim();
  if (/^\d+$/.test(v)) return Math.min(Number(v), 2 ** 31 - 1);
  // An HTTP date always names a weekday and a zone (IMF-fixdate, RFC 850 or asctime).
  if (!/^[A-Za-z]{3}/.test(v)) return undefined;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - nowMs) / 1000));
}

interface Target {
  /** Host name, or IP without brackets. */
  readonly host: string;
  readonly port: number;
  readonly path: string;
  /** Set when the host is an IP literal. */
  readonly ip?: string;
}

/** How much of a response body an outcome keeps. */
const RESPONSE_HEAD_BYTES = 1_024;

/** Parsed URLs: the dispatcher posts to the same few URLs again and again (parsing one is ~2% of its CPU). */
const targets = new Map<string, Target>();
const MAX_CACHED_TARGETS = 1_024;

/** parseTarget, remembered per URL string (a Target is immutable); a URL that does not parse is not remembered. */
function cachedTarget(url: string): Target {
  let target = targets.get(url);
  if (target === undefined) {
    target = parseTarget(url);
    if (targets.size >= MAX_CACHED_TARGETS) targets.clear();
    targets.set(url, target);
  }
  return target;
}

function parseTarget(url: string): Target {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InvalidUrlError("is not a valid URL");
  }
  if (u.protocol !== "https:")
    throw new InvalidUrlError(`must use https (not ${u.protocol.replace(/:$/, "")})`);
  if (u.username || u.password) throw new InvalidUrlError("must not contain a user name or password");
  // WHATWG URL has already normalised 2130706433, 0x7f000001 and 127.1 to 127.0.0.1.
  const host = u.hostname
    .replace(/^\[(.*)\]$/, "$1")
    .replace(/\.$/, "")
    .toLowerCase();
  if (!host) throw new InvalidUrlError("has no host");
  return Object.freeze({
    host,
    port: u.port ? Number(u.port) : 443,
    path: `${u.pathname}${u.search}`,
    ...(isIP(host) ? { ip: host } : {}),
  });
}

function refusal(address: string, why: string, hostname?: string): string {
  return hostname && hostname !== address
    ? `host ${hostname} resolves to ${address}, ${why}, which is not allowed`
    : `${address} is ${why}, which is not allowed`;
}

function refuseIfSpecial(address: string, allow: AllowList, hostname?: string): void {
  const why = specialAddressReason(address);
  if (why && !allow.address(address)) throw new RefusedAddressError(refusal(address, why, hostname));
}

interface AllowList {
  host(h: string): boolean;
  address(ip: string): boolean;
}

/** Host-name entries allow a host whatever it resolves to; IP entries allow that address under any name. */
function allowList(entries: readonly string[]): AllowList {
  const names = new Set<string>();
  const ips = new Set<string>();
  for (const e of entries) {
    const h = e
      .trim()
      .replace(/^\[(.*)\]$/, "$1")
      .replace(/\.$/, "")
      .toLowerCase();
    if (!h) continue;
    const key = ipKey(h);
    if (key) ips.add(key);
    else names.add(h);
  }
  return {
    host: (h) => names.has(h) || (isIP(h) !== 0 && ips.has(ipKey(h)!)),
    address: (ip) => ips.has(ipKey(ip) ?? ""),
  };
}

// ---- special addresses ----------------------------------------------------------------------------

type Range4 = readonly [base: number, bits: number, why: string];

const v4 = (dotted: string): number => dotted.split(".").reduce((n, o) => n * 256 + Number(o), 0);
const range4 = (cidr: string, why: string): Range4 => {
  const [base, bits] = cidr.split("/");
  return [v4(base), Number(bits), why];
};

/** IANA IPv4 special-purpose ranges that no notification should reach (most specific first). */
const SPECIAL_V4: readonly Range4[] = [
  range4("169.254.169.254/32", "the cloud metadata address (169.254.169.254)"),
  range4("168.63.129.16/32", "a cloud platform host address (168.63.129.16)"),
  range4("255.255.255.255/32", "the broadcast address"),
  range4("0.0.0.0/8", 'a "this network" address (0.0.0.0/8)'),
  range4("10.0.0.0/8", "a private address (10.0.0.0/8)"),
  range4("100.64.0.0/10", "a carrier-grade NAT address (100.64.0.0/10)"),
  range4("127.0.0.0/8", "a loopback address (127.0.0.0/8)"),
  range4("169.254.0.0/16", "a link-local address (169.254.0.0/16)"),
  range4("172.16.0.0/12", "a private address (172.16.0.0/12)"),
  range4("192.0.0.0/24", "an IETF protocol address (192.0.0.0/24)"),
  range4("192.0.2.0/24", "a documentation address (192.0.2.0/24)"),
  range4("192.88.99.0/24", "a 6to4 relay address (192.88.99.0/24)"),
  range4("192.168.0.0/16", "a private address (192.168.0.0/16)"),
  range4("198.18.0.0/15", "a benchmarking address (198.18.0.0/15)"),
  range4("198.51.100.0/24", "a documentation address (198.51.100.0/24)"),
  range4("203.0.113.0/24", "a documentation address (203.0.113.0/24)"),
  range4("224.0.0.0/4", "a multicast address (224.0.0.0/4)"),
  range4("240.0.0.0/4", "a reserved address (240.0.0.0/4)"),
];

function reason4(n: number): string | undefined {
  for (const [base, bits, why] of SPECIAL_V4) {
    const size = 2 ** (32 - bits);
    if (n >= base && n < base + size) return why;
  }
  return undefined;
}

/** 8 groups of 16 bits; undefined when not an IPv6 address. */
function parse6(s: string): number[] | undefined {
  if (isIP(s) !== 6) return undefined;
  let text = s.replace(/%.*$/, "");
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = v4(dotted[1]);
    text = `${text.slice(0, -dotted[1].length)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
  return groups.map((g) => Number.parseInt(g, 16));
}

const embedded4 = (g: readonly number[], at: number) => g[at] * 65536 + g[at + 1];

function reason6(g: readonly number[]): string | undefined {
  const zeroTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroTo(8)) return "the unspecified address (::)";
  if (zeroTo(7) && g[7] === 1) return "the loopback address (::1)";
  const inner = (kind: string, n: number) => {
    const why = reason4(n);
    return why ? `${kind} of ${dotted4(n)}, ${why}` : undefined;
  };
  // IPv4-mapped ::ffff:a.b.c.d: connecting to it connects to the IPv4 address.
  if (zeroTo(5) && g[5] === 0xffff) return inner("an IPv4-mapped address", embedded4(g, 6));
  // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address through the translator.
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0))
    return inner("a NAT64 address", embedded4(g, 6));
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return "a local-use NAT64 address (64:ff9b:1::/48)";
  // 6to4 (2002::/16) carries the IPv4 address in bits 16..47.
  if (g[0] === 0x2002) return inner("a 6to4 address", embedded4(g, 1));
  if ((g[0] & 0xfe00) === 0xfc00) return "a unique-local address (fc00::/7)";
  if ((g[0] & 0xffc0) === 0xfe80) return "a link-local address (fe80::/10)";
  if ((g[0] & 0xffc0) === 0xfec0) return "a site-local address (fec0::/10)";
  if ((g[0] & 0xff00) === 0xff00) return "a multicast address (ff00::/8)";
  if (g[0] === 0x2001 && g[1] === 0x0db8) return "a documentation address (2001:db8::/32)";
  if (g[0] === 0x3fff && (g[1] & 0xf000) === 0) return "a documentation address (3fff::/20)";
  if (g[0] === 0x2001 && g[1] < 0x0200) return "an IETF protocol address, e.g. Teredo (2001::/23)";
  if (g[0] === 0x0100 && zeroTo(4)) return "a discard-only address (100::/64)";
  if (g[0] === 0x5f00) return "a segment-routing address (5f00::/16)";
  // Everything else outside 2000::/3, including the deprecated IPv4-compatible ::a.b.c.d, is not
  // global unicast.
  if ((g[0] & 0xe000) !== 0x2000) return "not a global unicast address (outside 2000::/3)";
  return undefined;
}

const dotted4 = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");

/**
 * Why an IP address must not be reached by a notification (loopback, private, link-local, metadata,
 * multicast, reserved, …, including IPv4 addresses inside IPv6 forms), or undefined for an ordinary
 * public address. A string that is not an IP address is refused too.
 */
export function specialAddressReason(address: string): string | undefined {
  const kind = isIP(address);
  if (kind === 4) return reason4(v4(address));
  if (kind === 6) return reason6(parse6(address)!);
  return "not an IP address";
}

/** A canonical key of an IP address (IPv4-mapped IPv6 keyed as its IPv4), or undefined. */
function ipKey(s: string): string | undefined {
  const kind = isIP(s);
  if (kind === 4) return dotted4(v4(s));
  if (kind !== 6) return undefined;
  const g = parse6(s)!;
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return dotted4(embedded4(g, 6));
  return g.map((x) => x.toString(16)).join(":");
}

// ---- errors without secrets -----------------------------------------------------------------------

/** What must never appear in an error: the URL's path, query and user info, and every header value. */
function secretsOf(url: string, headers: Readonly<Record<string, string>>): string[] {
  const out: string[] = [];
  try {
    const u = new URL(url);
    for (const s of [u.pathname, u.search, u.username, u.password, decodeURIComponent(u.pathname)])
      if (s.length > 1) out.push(s);
  } catch {
    // An unparsable URL: describeError then only names the problem.
  }
  for (const v of Object.values(headers)) if (v.length >= 4) out.push(v);
  return out.sort((a, b) => b.length - a.length);
}

function errorOf(e: unknown, secrets: readonly string[]): { error: string; reason: string } {
  return { error: describeError(e, secrets), reason: failureReason(e) };
}

const TLS_CODES =
  /^(ERR_SSL_|ERR_TLS_|CERT_|DEPTH_ZERO_|SELF_SIGNED_|UNABLE_TO_|ERR_OSSL_|HOSTNAME_MISMATCH)/;

/**
 * What a tenant is told of an exchange that got no response (issue 41): a class, never the TLS or socket
 * library's text, which says what listens on the port (an SSH banner read as a TLS record, another
 * service's certificate). svc's own refusal of an address is its policy and is said as it is.
 */
export function failureReason(e: unknown): string {
  if (e instanceof RefusedAddressError) return `refused: ${e.message}`;
  if (e instanceof DeadlineError) return e.message;
  if (e instanceof InvalidUrlError) return `invalid URL: ${e.message}`;
  const c = e instanceof Error ? (e as { code?: unknown }).code : undefined;
  const code = typeof c === "string" ? c : "";
  const msg = e instanceof Error ? e.message : "";
  if (code === "ECONNREFUSED") return "connection refused";
  if (code === "ETIMEDOUT" || code === "ESOCKETTIMEDOUT") return "timed out";
  if (TLS_CODES.test(code) || code === "EPROTO" || /\b(ssl|tls|certificate)\b/i.test(msg))
    return "TLS handshake failed";
  if (code === "ENOTFOUND" || code.startsWith("EAI_")) return "host name not resolved";
  if (code === "EHOSTUNREACH" || code === "ENETUNREACH" || code === "EADDRNOTAVAIL")
    return "host unreachable";
  if (code === "ECONNRESET" || code === "EPIPE" || msg === "socket hang up")
    return "connection closed before a response";
  if (code.startsWith("ERR_HTTP_INVALID_HEADER") || code.startsWith("ERR_INVALID_CHAR"))
    return "invalid request header";
  return "connection failed";
}

function describeError(e: unknown, secrets: readonly string[]): string {
  if (!(e instanceof Error)) return "request failed";
  const code = (e as { code?: unknown }).code;
  let msg = e.message || e.name;
  for (const s of secrets) msg = msg.split(s).join("…");
  // Errors from header validation quote the offending value; never repeat it.
  if (typeof code === "string" && code.startsWith("ERR_HTTP_INVALID_HEADER")) msg = "invalid request header";
  if (typeof code === "string" && code.startsWith("ERR_INVALID_CHAR"))
    msg = "invalid character in a request header";
  if (e instanceof RefusedAddressError) return `refused: ${msg}`;
  return typeof code === "string" && !msg.includes(code) ? `${code}: ${msg}` : msg;
}
