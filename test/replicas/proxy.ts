import { Agent, createServer, type IncomingMessage, request } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A loopback HTTP load balancer in front of the replicas, doing what the nginx configuration of
 * docs/deploy.md does: a request goes to the next upstream in turn (round robin), except under a
 * `sticky` path prefix (remote write), where the client's address picks the upstream (`hash
 * $remote_addr`: a writer stays on one replica, whose ingest derives its VMs' utilization from the
 * previous sample it saw). An upstream that refuses the connection (a dead replica) is skipped for the
 * next (`proxy_next_upstream error`); an error after the request was sent answers 502 and is not
 * retried (the client decides). Bodies are buffered (the replay needs them); responses stream through.
 */
export interface RoundRobinProxy {
  readonly url: string;
  /** Requests each upstream answered, by index. */
  readonly served: number[];
  close(): Promise<void>;
}

export async function startRoundRobinProxy(
  upstreams: readonly string[],
  opts: { sticky?: readonly string[] } = {},
): Promise<RoundRobinProxy> {
  const agent = new Agent({ keepAlive: true });
  const served = upstreams.map(() => 0);
  let next = 0;
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const sticky = opts.sticky?.some((p) => req.url?.startsWith(p));
    const first = (sticky ? addressKey(req.socket.remoteAddress ?? "") : next++) % upstreams.length;
    for (let i = 0; i < upstreams.length; i++) {
      const index = (first + i) % upstreams.length;
      const got = await forward(upstreams[index], req, body).catch((err: NodeJS.ErrnoException) => err);
      if (got instanceof Error) {
        // Refused: nothing reached the replica. A reused keep-alive socket that the replica closed
        // under us: nothing was read either (Node's http docs, `request.reusedSocket`).
        if (got.code === "ECONNREFUSED" || (got.code === "ECONNRESET" && "reused" in got)) continue;
        res.writeHead(502).end(`upstream ${index}: ${got.code ?? got.message}`);
        return;
      }
      served[index]++;
      res.writeHead(got.statusCode ?? 502, { ...endToEnd(got.headers), "x-replica": String(index) });
      got.pipe(res);
      got.on("error", () => res.destroy());
      return;
    }
    res.writeHead(502).end("no upstream answered");
  });
  function forward(upstream: string, req: IncomingMessage, body: Buffer): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const u = new URL(upstream);
      const out = request(
        {
          agent,
          host: u.hostname,
          port: u.port,
          method: req.method,
          path: req.url,
          headers: {
            ...endToEnd(req.headers),
            host: u.host,
            "content-length": String(body.length),
            // nginx's $proxy_add_x_forwarded_for: the replicas trust the balancer (SVC_TRUSTED_PROXIES).
            "x-forwarded-for": [req.headers["x-forwarded-for"], req.socket.remoteAddress]
              .filter(Boolean)
              .join(", "),
          },
        },
        resolve,
      );
      out.on("error", (err) => reject(out.reusedSocket ? Object.assign(err, { reused: true }) : err));
      out.end(body);
    });
  }
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    close: () =>
      new Promise<void>((r) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Headers without the hop-by-hop ones (RFC 9110 §7.6.1): each side of the proxy has its own connection. */
function endToEnd(h: IncomingMessage["headers"]): IncomingMessage["headers"] {
  const { connection: _c, "keep-alive": _k, "transfer-encoding": _t, ...rest } = h;
  return rest;
}

/** An IPv4 address as its 32-bit number (other addresses: a sum of their characters). */
function addressKey(address: string): number {
  const v4 = /^(?:::ffff:)?(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address);
  if (v4) return v4.slice(1).reduce((n, octet) => n * 256 + Number(octet), 0);
  return [...address].reduce((n, ch) => n + ch.charCodeAt(0), 0);
}
