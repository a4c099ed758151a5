import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startSshLikeServer } from "../../testing/https-peer.ts";
import { SvcError } from "../errors.ts";
import { writeSelfSignedCertificate } from "../net/self-signed.ts";
import {
  checkDestinationUrl,
  closeIdleConnections,
  parseRetryAfter,
  postJson,
  specialAddressReason,
} from "./http.ts";

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

describe("notify/http", () => {
  let dir: string;
  let ca: Buffer;
  let server: Server;
  let port: number;
  const seen: Seen[] = [];
  /** TLS connections the receiver has accepted (a handshake each). */
  let handshakes = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-notify-http-"));
    writeSelfSignedCertificate(join(dir, "key.pem"), join(dir, "cert.pem"), {
      subject: "localhost",
      altNames: "IP:127.0.0.1,DNS:localhost",
      days: 1,
    });
    ca = readFileSync(join(dir, "cert.pem"));
    server = createServer({ key: readFileSync(join(dir, "key.pem")), cert: ca }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const path = req.url ?? "";
        seen.push({
          method: req.method ?? "",
          url: path,
          headers: req.headers,
          body: Buffer.concat(chunks).toString(),
        });
        if (path.startsWith("/ok")) {
          res.writeHead(200, { "content-type": "text/plain" }).end("ok");
        } else if (path.startsWith("/redirect")) {
          res.writeHead(302, { location: `https://127.0.0.1:${port}/redirected` }).end();
        } else if (path.startsWith("/busy")) {
          res.writeHead(429, { "retry-after": "120" }).end();
        } else if (path.startsWith("/big")) {
          res.writeHead(200);
          res.end(Buffer.alloc(4 * 1024 * 1024, 120));
        } else if (path.startsWith("/slow")) {
          // Never answers: the client's deadline ends the exchange.
        } else {
          res.writeHead(404).end();
        }
      });
    });
    server.on("secureConnection", () => handshakes++);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as AddressInfo).port;
  });

  after(() => {
    closeIdleConnections();
    server?.closeAllConnections();
    server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const local = ["127.0.0.1"];
  const body = JSON.stringify({ hello: "world" });

  it("postJson delivers to an allowlisted loopback receiver over HTTPS", async () => {
    const before = seen.length;
    const o = await postJson(
      `https://127.0.0.1:${port}/ok/hook?token=abc`,
      body,
      { "x-test": "1" },
      {
        timeoutMs: 5_000,
        allowHosts: local,
        ca,
      },
    );
    assert.equal(o.kind, "response");
    assert.equal(o.kind === "response" && o.status, 200);
    assert.ok(o.durationMs >= 0);
    const got = seen.slice(before);
    assert.equal(got.length, 1);
    assert.deepEqual(
      [got[0].method, got[0].url, got[0].body, got[0].headers["content-type"], got[0].headers["x-test"]],
      ["POST", "/ok/hook?token=abc", body, "application/json", "1"],
    );
  });

  it("postJson reaches an allowlisted host name through the resolver", async () => {
    const o = await postJson(
      `https://localhost:${port}/ok`,
      body,
      {},
      {
        timeoutMs: 5_000,
        allowHosts: ["localhost"],
        ca,
        lookup: async () => [{ address: "127.0.0.1", family: 4 }],
      },
    );
    assert.deepEqual(o.kind === "response" && o.status, 200);
  });

  it("postJson refuses the same receiver without the allowlist, and says why without the path", async () => {
    const before = seen.length;
    const o = await postJson(
      `https://127.0.0.1:${port}/ok/secret-path?sig=secret-query`,
      body,
      {},
      {
        timeoutMs: 5_000,
        ca,
      },
    );
    assert.equal(o.kind, "error");
    assert.match(o.kind === "error" ? o.error : "", /refused: 127\.0\.0\.1 is a loopback address/);
    assert.doesNotMatch(o.kind === "error" ? o.error : "", /secret/);
    assert.equal(seen.length, before, "nothing reached the receiver");
  });

  it("postJson checks the address actually connected to (DNS rebinding)", async () => {
    // Passed the save-time check with a public address; now the name resolves to loopback.
    await checkDestinationUrl("https://hooks.example.test/x", [], {
      lookup: async () => [{ address: "93.184.216.34", family: 4 }],
    });
    const before = seen.length;
    const o = await postJson(
      `https://hooks.example.test:${port}/ok`,
      body,
      {},
      {
        timeoutMs: 5_000,
        allowHosts: [],
        ca,
        lookup: async () => [
          { address: "93.184.216.34", family: 4 },
          { address: "127.0.0.1", family: 4 },
        ],
      },
    );
    assert.equal(o.kind, "error");
    assert.match(
      o.kind === "error" ? o.error : "",
      /hooks\.example\.test resolves to 127\.0\.0\.1, a loopback address/,
    );
    assert.equal(seen.length, before);
  });

  it("postJson returns a 302 as a response and does not follow its Location", async () => {
    const before = seen.length;
    const o = await postJson(
      `https://127.0.0.1:${port}/redirect`,
      body,
      {},
      { timeoutMs: 5_000, allowHosts: local, ca },
    );
    assert.equal(o.kind === "response" && o.status, 302);
    assert.deepEqual(
      seen.slice(before).map((s) => s.url),
      ["/redirect"],
    );
  });

  it("postJson reports Retry-After of a 429", async () => {
    const o = await postJson(
      `https://127.0.0.1:${port}/busy`,
      body,
      {},
      { timeoutMs: 5_000, allowHosts: local, ca },
    );
    assert.deepEqual(o.kind === "response" && [o.status, o.retryAfterSeconds], [429, 120]);
  });

  it("postJson reads at most 64 KiB of a large answer", async () => {
    const o = await postJson(
      `https://127.0.0.1:${port}/big`,
      body,
      {},
      { timeoutMs: 5_000, allowHosts: local, ca },
    );
    assert.equal(o.kind === "response" && o.status, 200);
  });

  it("postJson gives up on a slow receiver at the deadline", async () => {
    const o = await postJson(
      `https://127.0.0.1:${port}/slow/secret-path`,
      body,
      { authorization: "Bearer s3cr3t" },
      {
        timeoutMs: 300,
        allowHosts: local,
        ca,
      },
    );
    assert.equal(o.kind, "error");
    assert.match(o.kind === "error" ? o.error : "", /timed out after 300 ms/);
    assert.equal(o.kind === "error" && o.reason, "timed out after 300 ms");
    assert.ok(o.durationMs >= 290 && o.durationMs < 3_000, `took ${o.durationMs} ms`);
  });

  it("postJson reports a refused connection without the URL's path or header values", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const o = await postJson(
      `https://127.0.0.1:${freePort}/secret-path?q=secret-query`,
      body,
      { "x-sig": "secret-sig" },
      {
        timeoutMs: 5_000,
        allowHosts: local,
      },
    );
    assert.equal(o.kind, "error");
    assert.match(o.kind === "error" ? o.error : "", /ECONNREFUSED/);
    assert.doesNotMatch(o.kind === "error" ? o.error : "", /secret/);
    assert.equal(o.kind === "error" && o.reason, "connection refused");
  });

  it("postJson refuses a certificate it does not trust", async () => {
    const o = await postJson(
      `https://127.0.0.1:${port}/ok`,
      body,
      {},
      { timeoutMs: 5_000, allowHosts: local },
    );
    assert.equal(o.kind, "error");
    assert.match(o.kind === "error" ? o.error : "", /certificate/);
    assert.equal(o.kind === "error" && o.reason, "TLS handshake failed");
  });

  it("a tenant is told a class of failure, not what listens on the port: an SSH banner read as TLS is \"TLS handshake failed\", the library's text stays in `error` for the operator's log", async () => {
    const ssh = await startSshLikeServer();
    try {
      const o = await postJson(
        `https://127.0.0.1:${ssh.port}/hook`,
        body,
        {},
        { timeoutMs: 5_000, allowHosts: local, ca },
      );
      assert.equal(o.kind, "error");
      if (o.kind !== "error") return;
      assert.equal(o.reason, "TLS handshake failed");
      assert.match(o.error, /SSL|EPROTO|ECONNRESET|socket/i, "the raw text is kept for the log");
    } finally {
      await ssh.close();
    }
  });

  it("postJson reuses one TLS connection for sequential posts to the same receiver", async () => {
    closeIdleConnections();
    const first = handshakes;
    const before = seen.length;
    for (let i = 0; i < 3; i++) {
      const o = await postJson(
        `https://127.0.0.1:${port}/ok/${i}`,
        body,
        {},
        { timeoutMs: 5_000, allowHosts: local, ca },
      );
      assert.equal(o.kind === "response" && o.status, 200);
    }
    assert.equal(seen.length - before, 3);
    assert.equal(handshakes - first, 1, "one handshake for three posts");
  });

  it("postJson retries once on a new connection when the server has closed the idle one", async () => {
    closeIdleConnections();
    const opts = { timeoutMs: 5_000, allowHosts: local, ca };
    const o1 = await postJson(`https://127.0.0.1:${port}/ok/1`, body, {}, opts);
    assert.equal(o1.kind === "response" && o1.status, 200);
    const first = handshakes;
    const before = seen.length;
    // The server drops the kept-alive connection; the post that follows (in the same tick, before
    // the client can see the close) goes out on the dead socket, fails, and is sent again.
    server.closeIdleConnections();
    const o2 = await postJson(`https://127.0.0.1:${port}/ok/2`, body, {}, opts);
    assert.equal(o2.kind === "response" && o2.status, 200);
    assert.deepEqual(
      seen.slice(before).map((s) => s.url),
      ["/ok/2"],
    );
    assert.equal(handshakes - first, 1);
  });

  it("postJson does not share a connection between different allowlists", async () => {
    closeIdleConnections();
    const lookup = async () => [{ address: "127.0.0.1", family: 4 }];
    const allowed = await postJson(
      `https://localhost:${port}/ok`,
      body,
      {},
      { timeoutMs: 5_000, allowHosts: ["localhost"], ca, lookup },
    );
    assert.equal(allowed.kind === "response" && allowed.status, 200);
    // Same host, CA and resolver, an idle connection to it in a pool: still refused at connect time.
    const before = seen.length;
    const refused = await postJson(
      `https://localhost:${port}/ok`,
      body,
      {},
      { timeoutMs: 5_000, allowHosts: [], ca, lookup },
    );
    assert.equal(refused.kind, "error");
    assert.match(
      refused.kind === "error" ? refused.error : "",
      /refused: host localhost resolves to 127\.0\.0\.1/,
    );
    assert.equal(seen.length, before);
  });

  it("postJson checks an IP literal against each call's allowlist, even one changed in place", async () => {
    // The pool of the last options and the IP literals that passed are remembered: neither may let
    // a refused address through.
    const hosts = ["127.0.0.1"];
    const url = `https://127.0.0.1:${port}/ok`;
    const first = await postJson(url, body, {}, { timeoutMs: 5_000, allowHosts: hosts, ca });
    assert.equal(first.kind === "response" && first.status, 200);
    const before = seen.length;
    hosts.length = 0;
    const changed = await postJson(url, body, {}, { timeoutMs: 5_000, allowHosts: hosts, ca });
    assert.match(
      changed.kind === "error" ? changed.error : "",
      /refused: 127\.0\.0\.1 is a loopback address/,
    );
    const other = await postJson(url, body, {}, { timeoutMs: 5_000, allowHosts: [], ca });
    assert.match(other.kind === "error" ? other.error : "", /refused: 127\.0\.0\.1 is a loopback address/);
    assert.equal(seen.length, before, "nothing reached the receiver");
    const again = await postJson(url, body, {}, { timeoutMs: 5_000, allowHosts: local, ca });
    assert.equal(again.kind === "response" && again.status, 200);
  });

  // checkDestinationUrl: every special address is refused with a clear reason; no network is used
  // (literals are checked as they are, `localhost` resolves from the hosts file).
  const refused: [url: string, reason: RegExp][] = [
    ["https://127.0.0.1/hook", /127\.0\.0\.1 is a loopback address/],
    ["https://[::1]/hook", /::1 is the loopback address/],
    ["https://10.1.2.3/hook", /private address \(10\.0\.0\.0\/8\)/],
    ["https://172.16.0.1/hook", /private address \(172\.16\.0\.0\/12\)/],
    ["https://192.168.1.1/hook", /private address \(192\.168\.0\.0\/16\)/],
    ["https://169.254.169.254/latest/meta-data", /cloud metadata address/],
    ["https://100.64.0.1/hook", /carrier-grade NAT/],
    ["https://[fe80::1]/hook", /link-local address \(fe80::\/10\)/],
    ["https://[fc00::1]/hook", /unique-local address/],
    ["https://[::ffff:127.0.0.1]/hook", /IPv4-mapped address of 127\.0\.0\.1, a loopback address/],
    ["https://2130706433/hook", /127\.0\.0\.1 is a loopback address/],
    ["https://0x7f000001/hook", /127\.0\.0\.1 is a loopback address/],
    ["https://127.1/hook", /127\.0\.0\.1 is a loopback address/],
    ["https://0.0.0.0/hook", /"this network" address/],
    ["http://93.184.216.34/hook", /must use https \(not http\)/],
    ["https://user:pw@93.184.216.34/hook", /must not contain a user name or password/],
    ["not a url", /is not a valid URL/],
    ["https://localhost/hook", /host localhost resolves to (127\.0\.0\.1|::1), (a|the) loopback address/],
  ];
  for (const [url, reason] of refused) {
    it(`checkDestinationUrl refuses ${url}`, async () => {
      await assert.rejects(checkDestinationUrl(url, []), (e: unknown) => {
        assert.ok(e instanceof SvcError);
        assert.equal(e.code, "invalid_argument");
        assert.equal(e.metadata.field, "url");
        assert.match(e.message, reason);
        return true;
      });
    });
  }

  it("checkDestinationUrl accepts public addresses and allowlisted hosts", async () => {
    await checkDestinationUrl("https://93.184.216.34/hook", []);
    await checkDestinationUrl("https://[2606:2800:220:1:248:1893:25c8:1946]/hook", []);
    await checkDestinationUrl("https://127.0.0.1:8443/hook", ["127.0.0.1"]);
    await checkDestinationUrl("https://localhost/hook", ["localhost"]);
    await checkDestinationUrl("https://hooks.example.test/x", [], {
      lookup: async () => [{ address: "2606:2800:220:1:248:1893:25c8:1946", family: 6 }],
    });
  });

  it("checkDestinationUrl refuses a name with any special address, and one that does not resolve", async () => {
    await assert.rejects(
      checkDestinationUrl("https://hooks.example.test/x", [], {
        lookup: async () => [
          { address: "93.184.216.34", family: 4 },
          { address: "fd00:ec2::254", family: 6 },
        ],
      }),
      /resolves to fd00:ec2::254, a unique-local address/,
    );
    await assert.rejects(
      checkDestinationUrl("https://nowhere.invalid/x", [], {
        lookup: async () => {
          throw Object.assign(new Error("getaddrinfo ENOTFOUND nowhere.invalid"), { code: "ENOTFOUND" });
        },
      }),
      /host nowhere\.invalid does not resolve \(ENOTFOUND\)/,
    );
  });

  const addresses: [address: string, reason: RegExp | undefined][] = [
    ["93.184.216.34", undefined],
    ["8.8.8.8", undefined],
    ["2606:4700::1111", undefined],
    ["::ffff:93.184.216.34", undefined],
    ["64:ff9b::5db8:d822", undefined],
    ["255.255.255.255", /broadcast/],
    ["224.0.0.1", /multicast/],
    ["240.0.0.1", /reserved/],
    ["192.0.0.170", /IETF protocol/],
    ["198.18.0.1", /benchmarking/],
    ["100.100.100.200", /carrier-grade NAT/],
    ["169.254.1.1", /link-local/],
    ["::", /unspecified/],
    ["ff02::1", /multicast/],
    ["::ffff:10.0.0.1", /IPv4-mapped address of 10\.0\.0\.1, a private address/],
    ["::ffff:7f00:1", /IPv4-mapped address of 127\.0\.0\.1/],
    ["::ffff:169.254.169.254", /cloud metadata/],
    ["64:ff9b::127.0.0.1", /NAT64 address of 127\.0\.0\.1/],
    ["64:ff9b::a9fe:a9fe", /NAT64 address of 169\.254\.169\.254/],
    ["2002:7f00:1::1", /6to4 address of 127\.0\.0\.1/],
    ["::127.0.0.1", /not a global unicast/],
    ["2001:db8::1", /documentation/],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", /Teredo/],
    ["fe80::1%eth0", /link-local/],
    ["example.com", /not an IP address/],
  ];
  for (const [address, reason] of addresses) {
    it(`specialAddressReason ${address} → ${reason ?? "public"}`, () => {
      const got = specialAddressReason(address);
      if (reason === undefined) assert.equal(got, undefined);
      else assert.match(got ?? "", reason);
    });
  }

  it("parseRetryAfter reads delta seconds and HTTP dates", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    assert.equal(parseRetryAfter("120", now), 120);
    assert.equal(parseRetryAfter(" 0 ", now), 0);
    assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:05:00 GMT", now), 300);
    assert.equal(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now), 0);
    assert.equal(parseRetryAfter("-5", now), undefined);
    assert.equal(parseRetryAfter("soon", now), undefined);
    assert.equal(parseRetryAfter("2026-01-01", now), undefined);
  });
});
