import type { Logger } from "./log.ts";

/**
 * SIGTERM and SIGINT stop a sender once (the guest agent and the hypervisor collector alike): its stop
 * waits for the in-flight push and leaves the spool on disk, then the process exits with its counters logged.
 */
export function stopOnSignals(
  name: string,
  sender: { stop(): Promise<void>; stats(): object },
  logger: Logger,
): void {
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    sender.stop().then(
      () => {
        logger.info(`${name} stopped`, { signal, ...sender.stats() });
        process.exit(0);
      },
      (err: unknown) => {
        logger.error("stop failed", { reason: (err as Error).message });
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
}
