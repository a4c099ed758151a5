import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// The API the dev server proxies to: $SVC_BASE_URL, else the running demo's origin (npm start writes it to
// .data/demo-credentials.json at the repository root, whatever port it got), else the default port.
function apiOrigin(): string {
  if (process.env.SVC_BASE_URL) return process.env.SVC_BASE_URL;
  const demo = fileURLToPath(new URL("../../.data/demo-credentials.json", import.meta.url));
  if (existsSync(demo)) return (JSON.parse(readFileSync(demo, "utf8")) as { baseUrl: string }).baseUrl;
  return "http://127.0.0.1:8080";
}
const api = apiOrigin();

// The generated Connect code is the SDK's (packages/sdk/src/gen), imported by path so the console
// bundles exactly the descriptors the server was built from.
export default defineConfig({
  plugins: [react()],
  resolve: {
    alias: { "@gen": fileURLToPath(new URL("../sdk/src/gen", import.meta.url)) },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // No inline scripts or styles: the server's CSP allows only 'self'.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1024,
  },
  server: {
    // `npm run dev -w packages/console` proxies the API to a running `npm start`.
    proxy: { "/svc.": api, "/console/api": api, "/v1": api },
  },
});
