/**
 * A minimal Debian 12 root made by mmdebstrap from Debian's own archive, for the guest agent's package
 * life-cycle test and its footprint bench, and for the senders a customer may run instead of the agent
 * (test/node-exporter-senders.test.ts). The root is what a stock Debian 12 guest has that the agent's
 * install touches (apt, adduser, sudo, curl, ca-certificates, systemd) and no Node.js: installing the
 * package has apt resolve `nodejs` from the archive. The archive's package lists and the .debs of that
 * dependency closure are kept in the root, so installing needs no network once the root is built.
 *
 * Built once into <repo>/.cache/debian-root/ (git-ignored; in CI that is inside the run's clone, so at
 * most once per run) as a tar; every user extracts a fresh copy. Commands run in it through
 * `unshare --mount --pid` + `chroot`, with /proc and /sys mounted in the private namespace only, and the
 * host's network (so loopback reaches a test server in this process).
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const repoRoot = join(import.meta.dirname, "..", "..", "..");
const cacheDir = join(repoRoot, ".cache", "debian-root");

const SUITE = "bookworm";
const MIRRORS = [
  "deb http://deb.debian.org/debian bookworm main",
  "deb http://deb.debian.org/debian bookworm-updates main",
  "deb http://deb.debian.org/debian-security bookworm-security main",
];
// What a stock Debian 12 (cloud) image has that the install command uses, and the senders a customer may
// already run instead of the agent (docs/agent.md, "Use the agent you already run"): node_exporter, vmagent
// (in victoria-metrics) and Prometheus, for test/node-exporter-senders.test.ts. They share
// no dependency with nodejs (only libc6, libzstd1, adduser and the web UI's libjs-*), so the agent's
// install from the archive resolves the same packages with or without them.
const STOCK = "ca-certificates,curl,sudo,systemd,systemd-sysv,adduser";
const SENDERS = "prometheus-node-exporter,victoria-metrics,prometheus";
const INCLUDE = `${STOCK},${SENDERS}`;
// The package's dependencies, downloaded (not installed) with Recommends as the guest's apt would take
// them; the installed packages' own .debs are cleaned away first to keep the tar small.
const HOOK = `chroot "$1" sh -c 'apt-get clean && apt-get install --download-only -y -o APT::Install-Recommends=true nodejs'`;
// force-unsafe-io: dpkg skips its fsyncs, here and in the root's later installs; a throwaway root needs
// no crash safety, and on a busy disk the fsyncs took minutes.
// path-exclude: Prometheus's web UI pulls libjs-moment-timezone, whose 223 MB of time-zone data no test
// reads; without it the tar is 570 MB instead of 790 MB, and each extraction takes that much less.
const ARGS = [
  "--variant=apt",
  "--dpkgopt=force-unsafe-io",
  "--dpkgopt=path-exclude=/usr/share/javascript/moment-timezone/data/*",
  `--include=${INCLUDE}`,
  "--skip=cleanup/apt/lists",
  "--skip=cleanup/apt/cache",
  `--customize-hook=${HOOK}`,
  SUITE,
];

/** Why a Debian root cannot be made here (undefined when it can). */
export function debianRootUnavailable(): string | undefined {
  if (process.platform !== "linux") return "not Linux";
  if (process.getuid?.() !== 0) return "not root (mmdebstrap's root mode, chroot and mount need root)";
  for (const tool of ["mmdebstrap", "unshare", "chroot", "tar"]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0)
      return `${tool} is missing (apt-get install mmdebstrap)`;
  }
  return undefined;
}

/**
 * The cached root tar, built first when missing (minutes: the download from the archive). Returns its
 * path and how long the build took (0 when cached).
 */
export function debianRootImage(log: (line: string) => void = () => {}): { tar: string; buildMs: number } {
  const key = createHash("sha256")
    .update(JSON.stringify([ARGS, MIRRORS]))
    .digest("hex")
    .slice(0, 12);
  const tar = join(cacheDir, `debian12-${key}.tar`);
  if (existsSync(tar)) return { tar, buildMs: 0 };
  mkdirSync(cacheDir, { recursive: true });
  // One builder at a time: the life-cycle test and the senders' test may start together (test
  // concurrency 2), and two mmdebstraps would download and unpack the archive twice.
  const lock = `${tar}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    if (!lockHolderAlive(lock)) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    log(`waiting for another process building ${tar}…`);
    const deadline = Date.now() + 30 * 60_000;
    while (lockHolderAlive(lock)) {
      if (Date.now() > deadline) throw new Error(`${lock} held for 30 minutes; remove it if no build runs`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    }
    if (existsSync(tar)) return { tar, buildMs: 0 };
  }
  try {
    return build(tar, log);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Whether the process that took the build lock still runs (a killed test leaves its lock behind). */
function lockHolderAlive(lock: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(lock, "pid"), "utf8"));
  } catch {
    // Taken a moment ago, its pid not written yet; or gone.
    return existsSync(lock);
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function build(tar: string, log: (line: string) => void): { tar: string; buildMs: number } {
  const partial = `${tar}.${process.pid}.partial.tar`;
  log(`building the Debian 12 root with mmdebstrap into ${tar} (downloads from Debian's archive)…`);
  const t0 = performance.now();
  // Up to three tries: a download from Debian's archive can fail for a moment (a CI run once failed at
  // `apt-get update` while the archive answered again minutes later).
  const run = () =>
    spawnSync("mmdebstrap", ["--quiet", "--format=tar", ...ARGS, partial, ...MIRRORS], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  let r = run();
  for (let attempt = 2; r.status !== 0 && attempt <= 3; attempt++) {
    log(`mmdebstrap failed (status ${r.status}); try ${attempt} of 3 in 10 s`);
    rmSync(partial, { force: true });
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10_000);
    r = run();
  }
  if (r.status !== 0) {
    rmSync(partial, { force: true });
    throw new Error(`mmdebstrap failed (status ${r.status}):\n${r.stderr.slice(-4000)}`);
  }
  renameSync(partial, tar); // atomic: a reader sees the whole tar or none
  const buildMs = performance.now() - t0;
  log(`built the Debian 12 root in ${(buildMs / 1000).toFixed(0)} s`);
  return { tar, buildMs };
}

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Written to the command's stdin, then closed. */
  input?: string;
  /** Run as this user:group (chroot --userspec) instead of root. */
  userspec?: string;
}

/** A fresh copy of the root. */
export class DebianRoot {
  readonly dir: string;
  readonly #children = new Set<ChildProcess>();

  private constructor(dir: string) {
    this.dir = dir;
  }

  static extract(tar: string): DebianRoot {
    const dir = mkdtempSync(join(tmpdir(), "svc-debian12-"));
    const r = spawnSync("tar", ["-xf", tar, "-C", dir], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`extracting ${tar}: ${r.stderr}`);
    return new DebianRoot(dir);
  }

  /** Path on the host of `path` inside the root. */
  path(path: string): string {
    return join(this.dir, path);
  }

  /** Starts `argv` inside the root (pid 1 of its own namespace); the caller reads and ends it. */
  spawn(argv: string[], opts: RunOptions = {}): ChildProcess {
    const chroot = opts.userspec ? `chroot --userspec=${opts.userspec}` : "chroot";
    const child = spawn(
      "unshare",
      [
        "--mount",
        "--pid",
        "--fork",
        "--kill-child=SIGTERM",
        "sh",
        "-c",
        `mount --bind "$0" "$0" && mount -t proc proc "$0/proc" && mount --rbind /sys "$0/sys" && exec ${chroot} "$0" "$@"`,
        this.dir,
        ...argv,
      ],
      { stdio: ["pipe", "pipe", "pipe"], env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" } },
    );
    this.#children.add(child);
    child.on("exit", () => this.#children.delete(child));
    // A command that exits without reading its input closes the pipe: EPIPE here is not a failure.
    child.stdin?.on("error", () => {});
    child.stdin?.end(opts.input ?? "");
    return child;
  }

  /**
   * Sends `signal` to the program a spawn() started (unshare's child: sh, chroot and env exec into it).
   * unshare itself ignores SIGTERM while it waits for its child.
   */
  signal(child: ChildProcess, signal: NodeJS.Signals): void {
    if (child.exitCode !== null || child.signalCode !== null) return;
    let inner: string[] = [];
    try {
      inner = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8")
        .split(" ")
        .filter(Boolean);
    } catch {}
    for (const pid of inner) {
      try {
        process.kill(Number(pid), signal);
      } catch {}
    }
  }

  /** Runs `argv` inside the root to completion (asynchronously: it may talk to a server in this process). */
  run(argv: string[], opts: RunOptions = {}): Promise<RunResult> {
    const child = this.spawn(argv, opts);
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d) => {
      stdout += d;
    });
    child.stderr?.on("data", (d) => {
      stderr += d;
    });
    return new Promise((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (status) => resolve({ status, stdout, stderr }));
    });
  }

  /** `sh -c script` inside the root as root; throws with its output unless it exits 0. */
  async sh(script: string, input?: string): Promise<string> {
    const r = await this.run(["sh", "-c", script], { input });
    if (r.status !== 0)
      throw new Error(`in the root: ${script}\nstatus ${r.status}\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
  }

  /** Ends what is still running in the root and deletes it. */
  async close(): Promise<void> {
    await Promise.all(
      [...this.#children].map(
        (c) =>
          new Promise<void>((resolve) => {
            c.once("exit", () => resolve());
            this.signal(c, "SIGKILL");
            c.kill("SIGKILL");
          }),
      ),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}
