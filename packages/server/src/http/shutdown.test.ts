// Shutdown does not wait on clients (docs/decisions.md, "Shutdown closes connections without a
// request"): a connection that never sent a request is closed by the server at close(), and a
// keep-alive connection whose request is in flight gets its answer, then is closed. Asserted by who
// closes the socket, never by duration. SQLite only: the rule is the HTTP server's.
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { describe, it } from "node:test";
import { createStandaloneApp } from "../../testing/standalone-app.ts";

async function start(): Promise<Awaited<ReturnType<typeof createStandaloneApp>>> {
  const started = await createStandaloneApp();
  await started.app.server.listen({ host: "127.0.0.1", port: started.port });
  return started;
}

/** A raw connection that records what it received and whether the server ended it. */
async function open(port: number): Promise<{ socket: Socket; received: () => string; ended: Promise<void> }> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  let data = "";
  socket.setEncoding("latin1");
  socket.on("data", (d: string) => {
    data += d;
  });
  socket.on("error", () => {});
  const ended = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  return { socket, received: () => data, ended };
}

describe("shutdown closes connections that hold no request", () => {
  // Without the rule close() waits for the clients: the 72 s keep-alive, or for ever for a silent one.
  // The timeout turns that wait into a failure; it is far above what the test needs on any machine.
  it("close() ends a silent connection and a finished keep-alive one, without waiting for the clients", {
    timeout: 30_000,
  }, async () => {
    const { app, port, remove } = await start();
    try {
      const silent = await open(port);
      const kept = await open(port);
      kept.socket.write("GET /healthz HTTP/1.1\r\nHost: svc\r\nConnection: keep-alive\r\n\r\n");
      while (!kept.received().includes("\r\n\r\n")) await new Promise((r) => setTimeout(r, 5));
      assert.match(kept.received(), /^HTTP\/1\.1 200/);
      // Neither client hangs up: close() must not wait for their keep-alive timeout.
      await app.close();
      await Promise.all([silent.ended, kept.ended]);
      assert.equal(silent.received(), "", "the silent connection got no answer, only its close");
      assert.ok(silent.socket.destroyed && kept.socket.destroyed);
    } finally {
      remove();
    }
  });

  it("a request in flight at close() is answered before its connection is closed", {
    timeout: 30_000,
  }, async () => {
    const { app, port, remove } = await start();
    try {
      const c = await open(port);
      // Headers only: the request is in flight until its body's last byte arrives.
      const body = '{"ok":1}';
      c.socket.write(
        "POST /v1/no-such-route HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\n" +
          `Content-Length: ${body.length}\r\n\r\n`,
      );
      await new Promise((r) => setTimeout(r, 50));
      const closed = app.close();
      c.socket.write(body);
      await Promise.all([closed, c.ended]);
      assert.match(c.received(), /^HTTP\/1\.1 \d{3} /, "answered before the close");
    } finally {
      remove();
    }
  });
});
