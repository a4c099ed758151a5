// Entry of an ingest decode worker thread run from the sources: svc runs its TypeScript through tsx, and
// a worker does not inherit the main thread's loader hooks on every Node version, so it registers tsx
// itself (as the query workers' promql/pool/bootstrap.mjs does).
import { register } from "tsx/esm/api";

register();
await import("./worker.ts");
