import { after, before, beforeEach } from "node:test";
import { labelsFromRecord } from "../src/storage/interface.ts";
import type { TestDialect } from "./dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "./harness.ts";
import { type HttpsPeer, startHttpsPeer } from "./https-peer.ts";

/**
 * What the notification tests share (notify/*.test.ts): a loopback HTTPS receiver, an app on the test
 * clock whose dispatcher runs only when a test says so and may post to 127.0.0.1 over `tls`, and a
 * seeded project; the harness's defaults are the product's, no limit is lowered. Call it inside a describe: it registers the before, after and beforeEach hooks (the
 * receiver answers 204 and forgets what it received before each test); read its fields from a hook or
 * test that runs after them.
 */
export interface NotifyFixture {
  readonly t: TestApp;
  readonly p: SeededProject;
  readonly peer: HttpsPeer;
  /** Hypervisor CPU samples of `vm` (a full VM name of the project) every 30 s in [fromMs, toMs). */
  cpu(vm: string, fromMs: number, toMs: number, value: number): Promise<void>;
}

export function notifyFixture(
  dialect: TestDialect,
  o: { projectId: string; vmIds: string[]; tls: { cert: string; key: string } },
): NotifyFixture {
  let t: TestApp | undefined;
  let p: SeededProject | undefined;
  let peer: HttpsPeer | undefined;
  const ready = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error("notifyFixture: read before its before hook ran");
    return v;
  };
  before(async () => {
    peer = await startHttpsPeer(o.tls);
    t = await startTestApp(dialect, {
      notify: { dispatcherAutoStart: false, ca: o.tls.cert, options: { allowHosts: ["127.0.0.1"] } },
    });
    p = await t.seedProject(o.projectId, o.vmIds);
  });
  after(async () => {
    await t?.close();
    await peer?.close();
  });
  beforeEach(() => {
    if (!peer) return;
    peer.received.length = 0;
    peer.respond = () => ({ status: 204 });
  });
  return {
    get t() {
      return ready(t);
    },
    get p() {
      return ready(p);
    },
    get peer() {
      return ready(peer);
    },
    async cpu(vm, fromMs, toMs, value) {
      const a = ready(t).app.tsdb.appender();
      const labels = labelsFromRecord({
        __name__: "svc_vm_cpu_utilization_pct",
        project_id: o.projectId,
        vm,
        vm_id: vm.slice(vm.lastIndexOf("/") + 1),
        location: "dc-1",
        source: "hypervisor",
      });
      for (let ts = fromMs; ts < toMs; ts += 30_000) a.append(labels, ts, value);
      await a.commit();
    },
  };
}
