import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/**
 * Which of `pids` holds the loopback TCP connection from local port `port` (Linux: the socket's inode
 * from /proc/net/tcp, then each process's file descriptors). A receiver sees the sender's port; this
 * names the replica that sent a request. Undefined when none of them holds it (any more).
 */
export function pidOfConnection(port: number, pids: readonly number[]): number | undefined {
  const inodes = new Set<string>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:when retrnsmt uid timeout inode …
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      if (Number.parseInt(f[1].split(":")[1], 16) === port) inodes.add(`socket:[${f[9]}]`);
    }
  }
  for (const pid of pids) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (inodes.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) return pid;
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}
