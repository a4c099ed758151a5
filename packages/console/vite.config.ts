import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

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
    proxy: {
      "/svc.": "http://127.0.0.1:8080",
      "/console/api": "http://127.0.0.1:8080",
      "/v1": "http://127.0.0.1:8080",
    },
  },
});
