import { lookup as dnsLookup } from "node:dns";
import { request } from "node:https";
import { isIP } from "node:net";
import { invalidArgument } from "../errors.ts";

/**
 * The one outbound HTTP client of notifications: a JSON POST to a webhook or chat URL, guarded
 * against SSRF (DESIGN §11). HTTPS only; no redirects followed (a 3xx comes back as a response and
 * the caller counts it as a failure); one deadline covers connect, TLS, request and response; at most
 * 64 KiB of the answer is read. Every address the host resolves to is checked when the socket
 * connects, inside the `lookup` handed to https.request, so a name that resolves to a public address
 * at save time and to 127.0.0.1 later (DNS rebinding) is still refused.
 */

export type HttpOutcome =
  | {
      readonly kind: "response";
      readonly status: number;
      /** From Retry-After (delta seconds or an HTTP date), when present and valid. */
      readonly retryAfterSeconds?: number;
      readonly durationMs: number;
    }
  | {
      readonly kind: "error";
      /** Why no response came; never a header value, nor the URL's path or query (chat URLs are secrets). */
      readonly error: string;
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
  const allow = allowList(opts.allowHosts ?? []);
  const resolve = opts.lookup ?? systemResolve;
  const secrets = secretsOf(url, headers);

  let target: Target;
  try {
    target = parseTarget(url);
    // An IP literal never reaches `lookup` (net.connect skips it), so it is checked here.
    if (target.ip && !allow.host(target.host)) refuseIfSpecial(target.ip, allow);
  } catch (e) {
    return { kind: "error", error: describeError(e, secrets), durationMs: elapsed() };
  }

  return new Promise<HttpOutcome>((settle) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let status: number | undefined;
    let retryAfterSeconds: number | undefined;
    const finish = (o: HttpOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      settle(o);
    };
    const fail = (e: unknown) => {
      // Once the status line is in, the endpoint has answered: a stalled or cut body changes nothing.
      if (status !== undefined) respond();
      else finish({ kind: "error", error: describeError(e, secrets), durationMs: elapsed() });
    };
    const respond = () =>
      finish({
        kind: "response",
        status: status!,
        ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
        durationMs: elapsed(),
      });

    const hostAllowed = allow.host(target.host);
    const guardedLookup = (
      hostname: string,
      options: { family?: number | string; all?: boolean },
      callback: (err: Error | null, address: string | ResolvedAddress[], family?: number) => void,
    ) => {
      resolve(hostname)
        .then((addresses) => {
          if (addresses.length === 0) throw new Error(`${hostname} has no address`);
          if (!hostAllowed) for (const a of addresses) refuseIfSpecial(a.address, allow, hostname);
          const family =
            options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : Number(options.family ?? 0);
          const usable =
            family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
          if (usable.length === 0) throw new Error(`${hostname} has no IPv${family} address`);
          if (options.all)
            callback(
              null,
              usable.map((a) => ({ address: a.address, family: a.family })),
            );
          else callback(null, usable[0].address, usable[0].family);
        })
        .catch((e: unknown) => callback(e instanceof Error ? e : new Error(String(e)), ""));
    };

    let req: ReturnType<typeof request>;
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
        // No pooled sockets: each attempt connects (and is checked) anew, whatever allowlist it has.
        agent: false,
        lookup: guardedLookup,
        ...(opts.ca === undefined ? {} : { ca: opts.ca }),
        ...(target.ip ? {} : { servername: target.host }),
      });
    } catch (e) {
      // Invalid header names or values throw synchronously.
      finish({ kind: "error", error: describeError(e, secrets), durationMs: elapsed() });
      return;
    }
    timer = setTimeout(() => {
      req.destroy(new Error(`timed out after ${opts.timeoutMs} ms`));
    }, opts.timeoutMs);

    req.on("error", fail);
    req.on("response", (res) => {
      status = res.statusCode ?? 0;
      const ra = res.headers["retry-after"];
      retryAfterSeconds = ra === undefined ? undefined : parseRetryAfter(ra, Date.now());
      let read = 0;
      res.on("data", (chunk: Buffer) => {
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
  });
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

function parseTarget(url: string): Target {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error("is not a valid URL");
  }
  if (u.protocol !== "https:") throw new Error(`must use https (not ${u.protocol.replace(/:$/, "")})`);
  if (u.username || u.password) throw new Error("must not contain a user name or password");
  // WHATWG URL has already normalised 2130706433, 0x7f000001 and 127.1 to 127.0.0.1.
  const host = u.hostname
    .replace(/^\[(.*)\]$/, "$1")
    .replace(/\.$/, "")
    .toLowerCase();
  if (!host) throw new Error("has no host");
  return {
    host,
    port: u.port ? Number(u.port) : 443,
    path: `${u.pathname}${u.search}`,
    ...(isIP(host) ? { ip: host } : {}),
  };
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
