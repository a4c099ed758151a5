import { replicaSuite } from "./suite.ts";

// One file per engine, so scripts/test.mjs runs the two suites side by side.
await replicaSuite("prometheus");
