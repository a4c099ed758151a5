// A worker for lifecycle/worker-script.test.ts: answers what it can see of how it was started.
import { parentPort, workerData } from "node:worker_threads";
import { double } from "./echo-double.ts";

parentPort?.postMessage({
  doubled: double((workerData as { n: number }).n),
  bundled: import.meta.url.includes("/node_modules/.cache/svc-workers/"),
  loaders: process.execArgv.filter((a) => a.includes("tsx")),
});
