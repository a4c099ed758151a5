/**
 * `npm run bench:vm-query [-- --quick] [-- --backend remote]`: the VM query benchmark.
 *
 * - embedded (default): QueryVMMonitoring, ListVMMonitoring and an export shard against svc with its
 *   embedded store, and Prometheus as a peer (bench/vm-query/embedded.ts, where the options are).
 * - `--backend remote`: QueryVMMonitoring through svc with SVC_METRICS_BACKEND=remote against the
 *   equivalent queries sent straight to the same VictoriaMetrics, interleaved request by request
 *   (bench/vm-query/remote.ts).
 */
import { backendArg } from "../common/args.ts";

if (backendArg() === "remote") await import("./remote.ts");
else await import("./embedded.ts");
