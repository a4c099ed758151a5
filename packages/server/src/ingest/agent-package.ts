import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { FastifyPluginAsync } from "fastify";

/**
 * The guest agent's Debian package (built by scripts/build-agent.mjs), published by svc so the install
 * command of EnableExpandedMonitoring can fetch it and check its SHA-256 before installing it.
 */
export interface AgentPackage {
  /** e.g. svc-agent_0.1.0_all.deb */
  readonly file: string;
  readonly sha256: string;
  readonly bytes: Buffer;
}

export const AGENT_PACKAGE_PATH = "/v1/agent/packages";

/**
 * Reads the package named by SHA256SUMS in `dir` and checks it against its sum; undefined when none is
 * built. A package whose bytes do not match its sum is an error: svc never publishes one.
 */
export function loadAgentPackage(dir: string): AgentPackage | undefined {
  return loadPublishedPackage(dir, /svc-agent_[0-9A-Za-z.+~-]+_all\.deb/, "svc-agent");
}

/** The same for any file published with its SHA256SUMS line (the agent's .deb, the CLI's .tgz). */
export function loadPublishedPackage(dir: string, file: RegExp, what: string): AgentPackage | undefined {
  const sums = join(dir, "SHA256SUMS");
  if (!existsSync(sums)) return undefined;
  const m = new RegExp(`^([0-9a-f]{64}) {2}(${file.source})$`, "m").exec(readFileSync(sums, "utf8"));
  if (!m) throw new Error(`${sums}: no ${what} package line`);
  const bytes = readFileSync(join(dir, m[2]));
  const actual = createHash("sha256").update(bytes).digest("hex");
  if (actual !== m[1]) throw new Error(`${join(dir, m[2])}: SHA-256 ${actual} does not match SHA256SUMS`);
  return { file: m[2], sha256: m[1], bytes };
}

/** GET /v1/agent/packages/<file> and /SHA256SUMS: public (the package holds no secret), cacheable. */
export function agentPackageRoutes(pkg: AgentPackage | undefined): FastifyPluginAsync {
  return publishedPackageRoutes(AGENT_PACKAGE_PATH, pkg, "application/vnd.debian.binary-package", "agent");
}

/** GET <path>/<file> and <path>/SHA256SUMS for one published package. */
export function publishedPackageRoutes(
  path: string,
  pkg: AgentPackage | undefined,
  contentType: string,
  what: string,
): FastifyPluginAsync {
  return async (scope) => {
    scope.get(`${path}/SHA256SUMS`, async (_req, reply) => {
      if (!pkg)
        return reply.code(404).type("text/plain").send(`the ${what} package is not built on this server\n`);
      return reply
        .type("text/plain")
        .header("cache-control", "no-cache")
        .send(`${pkg.sha256}  ${pkg.file}\n`);
    });
    scope.get<{ Params: { file: string } }>(`${path}/:file`, async (req, reply) => {
      if (!pkg || req.params.file !== pkg.file)
        return reply.code(404).type("text/plain").send(`no such ${what} package\n`);
      return reply
        .type(contentType)
        .header("cache-control", "public, max-age=31536000, immutable")
        .header("content-disposition", `attachment; filename="${pkg.file}"`)
        .send(pkg.bytes);
    });
  };
}

/**
 * The packed svc CLI (scripts/build-cli.mjs), published so a CI job installs it from the svc it talks to
 * and checks its SHA-256 first (issue 27, item 10; the CI trust setup screen shows the steps).
 */
export const CLI_PACKAGE_PATH = "/v1/cli/packages";

export function loadCliPackage(dir: string): AgentPackage | undefined {
  return loadPublishedPackage(dir, /svc-cli-[0-9A-Za-z.+~-]+\.tgz/, "svc-cli");
}

export function cliPackageRoutes(pkg: AgentPackage | undefined): FastifyPluginAsync {
  return publishedPackageRoutes(CLI_PACKAGE_PATH, pkg, "application/gzip", "CLI");
}
