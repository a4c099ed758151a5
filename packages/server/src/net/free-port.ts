import { createServer } from "node:net";

/**
 * A port that was free a moment ago. With PORT=0 the app asks for one before it starts, so the origin
 * it writes into links, install commands and cookies is the one it really listens on (a port chosen
 * by listen(0) would only be known after every component was built with the configured one).
 */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, host, () => {
      const address = s.address();
      const port = typeof address === "object" && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}
