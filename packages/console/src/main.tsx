import { Code, ConnectError } from "@connectrpc/connect";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import "uplot/dist/uPlot.min.css";
import "./styles.css";
import { App } from "./app.tsx";

const FINAL = new Set([
  Code.NotFound,
  Code.InvalidArgument,
  Code.PermissionDenied,
  Code.Unauthenticated,
  Code.FailedPrecondition,
]);

const queries = new QueryClient({
  defaultOptions: {
    // Monitoring data moves every 30 s: refetch on focus, keep the last answer while refetching.
    // One retry for what may pass a moment later; never for an answer that will not change (not found,
    // refused, invalid), which would only repeat the same error.
    queries: {
      staleTime: 15_000,
      retry: (failures, err) => failures < 1 && !(err instanceof ConnectError && FINAL.has(err.code)),
      refetchOnWindowFocus: true,
    },
  },
});

createRoot(document.getElementById("root") as HTMLElement).render(
  <StrictMode>
    <QueryClientProvider client={queries}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
