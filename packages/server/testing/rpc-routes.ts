/**
 * The routes http/services/index.ts adds, read from the services themselves (their descriptors), and
 * src/http/rpc-routes.ts's text for them. `tsx packages/server/testing/rpc-routes.ts --write` (run by
 * `npm run generate`) rewrites that file; rpc-routes.test.ts checks it is current.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createConnectRouter } from "@connectrpc/connect";
import type { RpcRoute } from "../src/http/connect-plugin.ts";
import { rpcRouteOf } from "../src/http/rpc.ts";
import { registerServices, type ServicesDeps } from "../src/http/services/index.ts";

export const RPC_ROUTES_FILE = new URL("../src/http/rpc-routes.ts", import.meta.url);

/**
 * Registering a service only names its methods (handlers are closures over the dependencies, called
 * per request), so the routes are read with dependencies that are never used.
 */
export function servicesRpcRoutes(): RpcRoute[] {
  const router = createConnectRouter();
  const unused = new Proxy({}, { get: () => unused }) as never;
  registerServices(router, new Proxy({}, { get: () => unused }) as ServicesDeps);
  return router.handlers.map(rpcRouteOf);
}

/** rpc-routes.ts with `routes` as its list. */
export function rpcRoutesText(routes: readonly RpcRoute[]): string {
  const text = readFileSync(RPC_ROUTES_FILE, "utf8");
  const head = text.slice(0, text.indexOf("export const RPC_ROUTES"));
  const lines = routes.map(
    (r) => `  { path: ${JSON.stringify(r.path)}, methods: ${JSON.stringify(r.methods)} },`,
  );
  return `${head}export const RPC_ROUTES: readonly RpcRoute[] = [\n${lines.join("\n")}\n];\n`;
}

if (process.argv.includes("--write")) writeFileSync(RPC_ROUTES_FILE, rpcRoutesText(servicesRpcRoutes()));
