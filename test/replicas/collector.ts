import { request } from "node:http";
import { encodeRemoteWriteBody } from "@svc/remotewrite";
import { rwSeries } from "../../packages/server/testing/remote-write.ts";

/**
 * A hypervisor collector on its own loopback address (127.0.0.2, …: the balancer keeps a writer on
 * one replica by address), writing one sample of `metric` for `vm` per batch, now-stamped, and
 * retrying a batch until it is acknowledged, as a remote-write client does.
 */
export interface Collector {
  /** What got a 2xx, in order: [ms, value, the replica that answered (the balancer's x-replica)]. */
  readonly acked: [number, number, string][];
  /** Attempts that got no 2xx (a killed replica's connection, a 5xx) and were retried. */
  readonly retried: () => number;
  /** A 4xx other than 429: the batch is wrong, not a replica (set, and the collector stops). */
  readonly refusal: () => string | undefined;
  stop(): Promise<void>;
}

export function startCollector(opts: {
  url: string;
  token: string;
  localAddress: string;
  metric: string;
  vm: string;
  /**
   * Instead of `metric`: the VM's CPU counter, as busy as `pct` % of `vcpus` since the previous batch,
   * and its vCPUs (ingest derives svc_vm_cpu_utilization_pct from two samples); acked values are the counter.
   */
  cpu?: { vcpus: number; pct: number };
  /** Pause between two batches, ms (default 50). */
  pauseMs?: number;
}): Collector {
  const acked: [number, number, string][] = [];
  let writing = true;
  let retried = 0;
  let refusal: string | undefined;
  const running = (async () => {
    for (let seq = 0; writing && !refusal; seq++) {
      const ts = Math.max(Date.now(), (acked.at(-1)?.[0] ?? 0) + 1);
      const last = acked.at(-1);
      const cpu = opts.cpu;
      const value = cpu
        ? last === undefined
          ? 1000
          : last[1] + (cpu.pct / 100) * cpu.vcpus * ((ts - last[0]) / 1000)
        : seq;
      const body = encodeRemoteWriteBody({
        timeseries: cpu
          ? [
              rwSeries("svc_vm_cpu_seconds_total", { vm: opts.vm }, [[ts, value]]),
              rwSeries("svc_vm_vcpus", { vm: opts.vm }, [[ts, cpu.vcpus]]),
            ]
          : [rwSeries(opts.metric, { vm: opts.vm }, [[ts, value]])],
        metadata: [],
      });
      while (writing) {
        const res = await post(opts, body).catch(() => undefined);
        if (res && res.status >= 200 && res.status < 300) {
          acked.push([ts, value, res.replica]);
          break;
        }
        if (res && res.status < 500 && res.status !== 429) {
          refusal = `${res.status} ${res.text}`;
          break;
        }
        retried++;
        await new Promise((r) => setTimeout(r, 100));
      }
      await new Promise((r) => setTimeout(r, opts.pauseMs ?? 50));
    }
  })();
  return {
    acked,
    retried: () => retried,
    refusal: () => refusal,
    async stop() {
      writing = false;
      await running;
    },
  };
}

function post(
  opts: { url: string; token: string; localAddress: string },
  body: Uint8Array,
): Promise<{ status: number; text: string; replica: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${opts.url}/v1/ingest/prometheus/api/v1/write`,
      {
        method: "POST",
        localAddress: opts.localAddress,
        timeout: 30_000,
        headers: {
          "Content-Encoding": "snappy",
          "Content-Type": "application/x-protobuf",
          "X-Prometheus-Remote-Write-Version": "0.1.0",
          Authorization: `Bearer ${opts.token}`,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          text += d;
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, text, replica: String(res.headers["x-replica"]) }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end(body);
  });
}
