// `npm start`: brings the builds it serves up to date (the console, the guest agent's package, the CLI's
// package and the server's own bundle: each only when a source is newer than its build), then runs the
// server from its production bundle (packages/server/dist, scripts/build-server.mjs) in this process.
// The bundle with its V8 code cache is ready in a fraction of the time the TypeScript sources take
// through tsx (docs/performance.md, "Start-up"); after an edit the next `npm start` rebuilds it first.
// `node --import tsx packages/server/src/main.ts` still runs the sources as they are.
import { buildAgent } from "./build-agent.mjs";
import { buildCli } from "./build-cli.mjs";
import { buildConsole } from "./build-console.mjs";
import { buildServer } from "./build-server.mjs";

await buildConsole();
await buildAgent({ optional: true });
await buildCli();
await buildServer();
await import("../packages/server/dist/main.js");
