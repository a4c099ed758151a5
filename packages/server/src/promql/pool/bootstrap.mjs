// Entry of a query worker thread: svc runs its TypeScript through tsx, and a worker does not
// inherit the main thread's loader hooks on every Node version, so it registers tsx itself.
import { register } from "tsx/esm/api";

register();
await import("./worker.ts");
