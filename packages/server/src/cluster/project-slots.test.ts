import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { testDialects } from "../../testing/dialects.ts";
import { SvcError } from "../errors.ts";
import { createSharedProjectLimiter, type SharedProjectLimiter } from "./project-slots.ts";

function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => {
    open = r;
  });
  return { p, open };
}

const isRefusal = (e: unknown) =>
  e instanceof SvcError && e.code === "resource_exhausted" && e.retryAfterSeconds === 2;

const { dialect: postgres, skip } = (await testDialects())[1];

describe("createSharedProjectLimiter() (postgres)", { skip }, () => {
  let url: string;
  let drop: () => Promise<void>;
  let admin: pg.Client;
  const limiters: SharedProjectLimiter[] = [];
  /** A replica's limiter: cap 2, a short wait unless told. */
  const replica = (maxWaitMs = 300) => {
    const l = createSharedProjectLimiter(url, { maxConcurrent: 2, maxQueued: 4, maxWaitMs, pollMs: 10 });
    limiters.push(l);
    return l;
  };
  const advisoryLocks = async () =>
    Number(
      (
        await admin.query<{ n: string }>(
          "select count(*) as n from pg_locks where locktype = 'advisory' and granted and database = (select oid from pg_database where datname = current_database())",
        )
      ).rows[0].n,
    );

  before(async () => {
    const created = await postgres.create();
    url = created.databaseUrl!;
    drop = created.drop;
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
  });
  after(async () => {
    for (const l of limiters) await l.close();
    await admin?.end();
    await drop?.();
  });

  it("holds the cap across two replicas; another project is not affected", async () => {
    const a = replica(60_000);
    const b = replica();
    const g = gate();
    const order: string[] = [];
    const running = [1, 2].map((k) => a.run("p", () => g.p.then(() => order.push(`a${k}`))));
    // A third at the same replica waits in its own queue, holding no lock.
    const queuedAtA = a.run("p", async () => order.push("a3"));
    while ((await advisoryLocks()) < 2) await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(a.stats("p"), { running: 2, queued: 1 });
    await assert.rejects(
      b.run("p", async () => order.push("b")),
      (e: unknown) => isRefusal(e) && /waited 300 ms/.test((e as Error).message),
    );
    assert.equal(await b.run("q", async () => "other"), "other");
    assert.equal(await advisoryLocks(), 2, "a replica never holds more than the cap, nor a slot twice");
    g.open();
    await Promise.all([...running, queuedAtA]);
    assert.deepEqual(order, ["a1", "a2", "a3"]);
    assert.equal(await advisoryLocks(), 0, "every slot given back");
  });

  it("lets a waiter at one replica run when the other finishes", async () => {
    const a = replica();
    const b = replica(60_000);
    const g = gate();
    const order: string[] = [];
    const running = [1, 2].map((k) => a.run("p", () => g.p.then(() => order.push(`a${k}`))));
    while ((await advisoryLocks()) < 2) await new Promise((r) => setTimeout(r, 5));
    const waiting = b.run("p", async () => order.push("b"));
    g.open();
    await Promise.all([...running, waiting]);
    assert.deepEqual(order, ["a1", "a2", "b"]);
  });

  it("frees the slots of a replica whose connection dies; that replica reconnects", async () => {
    const a = replica();
    const b = replica(60_000);
    const g = gate();
    const stuck = [1, 2].map(() => a.run("p", () => g.p));
    while ((await advisoryLocks()) < 2) await new Promise((r) => setTimeout(r, 5));
    // A crash: the server ends the session that holds the locks.
    const killed = await admin.query(
      "select pg_terminate_backend(pid) from (select distinct pid from pg_locks where locktype = 'advisory' and granted and database = (select oid from pg_database where datname = current_database())) l",
    );
    assert.equal(killed.rowCount, 1, "both slots on one connection");
    assert.equal(await b.run("p", async () => "b ran"), "b ran");
    g.open();
    await Promise.all(stuck);
    assert.equal(await a.run("p", async () => "a again"), "a again");
    assert.equal(await advisoryLocks(), 0);
  });
});
