// The doc-test (docs/contributing.md#runnable-examples): every block marked `runnable` in README.md and
// docs/*.md runs, in order, against one demo server, as a reader runs it from a checkout.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type ServerProcess, startServerProcess } from "../packages/server/testing/server-process.ts";

const root = join(import.meta.dirname, "..");

export interface DocBlock {
  /** file:line of the opening fence, the test's name. */
  readonly name: string;
  readonly lang: "sh" | "ts";
  readonly code: string;
  /** What it needs that the test has not (`needs=internet,grafana`): the block is skipped, by name. */
  readonly needs: readonly string[];
}

/** The blocks of one Markdown text whose info string is `sh runnable …` or `ts runnable …`. */
export function runnableBlocks(file: string, text: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})(\S*)(.*)$/.exec(lines[i]);
    if (!open) continue;
    // CommonMark: the block ends at a fence of at least as many backticks, so ```` can show ``` inside.
    const fence = open[1];
    const end = lines.findIndex((l, j) => j > i && l.startsWith(fence) && /^`+\s*$/.test(l));
    if (end < 0) throw new Error(`${file}:${i + 1}: the block is not closed`);
    const words = open[3].trim().split(/\s+/);
    if (words.includes("runnable")) {
      const lang = open[2] === "sh" || open[2] === "bash" ? "sh" : open[2] === "ts" ? "ts" : undefined;
      if (!lang) throw new Error(`${file}:${i + 1}: runnable blocks are sh or ts, not ${open[2]}`);
      const needs = words
        .filter((w) => w.startsWith("needs="))
        .flatMap((w) => w.slice("needs=".length).split(","));
      blocks.push({ name: `${file}:${i + 1}`, lang, code: lines.slice(i + 1, end).join("\n"), needs });
    }
    i = end;
  }
  return blocks;
}

describe("runnableBlocks()", () => {
  it("takes sh, bash and ts blocks marked runnable, with what they need, and nothing else", () => {
    const md = [
      "```sh runnable",
      "echo a",
      "```",
      "```sh",
      "echo illustration",
      "```",
      "````md",
      "```sh runnable",
      "echo shown, not run",
      "```",
      "````",
      "```ts runnable needs=grafana,internet",
      "console.log(1);",
      "```",
      "```bash runnable",
      "echo b",
      "```",
    ].join("\n");
    assert.deepEqual(
      runnableBlocks("x.md", md).map((b) => [b.name, b.lang, b.code, b.needs.join(",")]),
      [
        ["x.md:1", "sh", "echo a", ""],
        ["x.md:12", "ts", "console.log(1);", "grafana,internet"],
        ["x.md:15", "sh", "echo b", ""],
      ],
    );
  });
  it("refuses an unclosed block and a runnable block of another language, naming the line", () => {
    assert.throws(
      () => runnableBlocks("x.md", "text\n```sh runnable\necho"),
      /x\.md:2: the block is not closed/,
    );
    assert.throws(() => runnableBlocks("x.md", "```yaml runnable\na: 1\n```"), /x\.md:1: .*not yaml/);
  });
});

/** README.md first, then docs/*.md by name: the order a reader meets them. */
function documents(): string[] {
  const docs = readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", ...docs];
}

/** Untracked paths of the checkout (git's view), to catch an example that leaves files behind. */
function untracked(): Set<string> {
  let out: Buffer;
  try {
    out = execFileSync("git", ["status", "--porcelain", "--untracked-files=all"], { cwd: root });
  } catch {
    return new Set(); // not a git checkout (an unpacked tarball): the stand-in checkout's own check remains
  }
  return new Set(
    out
      .toString()
      .split("\n")
      .filter((l) => l.startsWith("??"))
      .map((l) => l.slice(3)),
  );
}

describe("runnable blocks in README.md and docs/*.md", () => {
  const blocks = documents().flatMap((f) => runnableBlocks(f, readFileSync(join(root, f), "utf8")));
  // A stand-in checkout: the repository's files through links, its own .data (the demo's) and nothing else,
  // so a block reads .data/demo-credentials.json as a reader's would and whatever it leaves is seen.
  const checkout = mkdtempSync(join(tmpdir(), "svc-doc-test-"));
  const linked = ["node_modules", "packages", "docs", "deploy", "scripts", "package.json", "tsconfig.json"];
  const home = mkdtempSync(join(tmpdir(), "svc-doc-test-home-"));
  let server: ServerProcess | undefined;
  let untrackedBefore = new Set<string>();

  // `npx svc` runs the checkout's node_modules/.bin/svc; this npx does just that without npm's start-up
  // (about 0.3 s of CPU a call, a third of the doc-test's), and hands anything else to the real npx.
  const bin = join(home, "bin");
  const realNpx = execFileSync("bash", ["-c", "command -v npx"]).toString().trim();

  before(async () => {
    mkdirSync(bin);
    writeFileSync(
      join(bin, "npx"),
      `#!/bin/sh\nif [ -x "node_modules/.bin/$1" ]; then b=$1; shift; exec "node_modules/.bin/$b" "$@"; fi\nexec ${realNpx} "$@"\n`,
      { mode: 0o755 },
    );
    for (const name of linked) symlinkSync(join(root, name), join(checkout, name));
    untrackedBefore = untracked();
    const env = withoutSvc(process.env);
    server = await startServerProcess({
      env: {
        ...env,
        PORT: "0",
        SVC_DATA_DIR: join(checkout, ".data"),
        SVC_LOG_LEVEL: "warn",
        // The demo's evaluator every 2 s instead of 30, so a block waiting for an incident's email is quick.
        SVC_EVALUATION_INTERVAL_SECONDS: "2",
      },
      ready: /demo project: /,
    });
  });

  after(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill("SIGTERM");
      await server.exited;
    }
    rmSync(checkout, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("finds the runnable blocks", () => {
    assert.ok(blocks.length >= 10, `only ${blocks.length} runnable blocks`);
  });

  for (const block of blocks) {
    // DOC_TEST_ONLY=docs/api.md runs one document's blocks (still in order, against the same kind of server).
    const only = process.env.DOC_TEST_ONLY;
    const skip =
      block.needs.length > 0
        ? `needs ${block.needs.join(", ")}`
        : only && !block.name.startsWith(only)
          ? `DOC_TEST_ONLY=${only}`
          : false;
    it(block.name, { skip }, () => {
      const env = {
        ...withoutSvc(process.env),
        HOME: home,
        PATH: `${bin}:${process.env.PATH}`,
        XDG_CONFIG_HOME: join(home, ".config"),
        npm_config_update_notifier: "false",
      };
      let r: ReturnType<typeof spawnSync>;
      if (block.lang === "sh") {
        r = spawnSync("bash", ["-euo", "pipefail", "-c", block.code], {
          cwd: checkout,
          env,
          timeout: 90_000,
        });
      } else {
        // Beside the checkout's node_modules, so `@svc/sdk` resolves as it does in a reader's file.
        const dir = join(checkout, ".data", "doc-test");
        mkdirSync(dir, { recursive: true });
        const file = join(dir, `${block.name.replace(/[^a-z0-9]+/gi, "-")}.ts`);
        writeFileSync(file, block.code);
        r = spawnSync(process.execPath, ["--import", "tsx", file], { cwd: checkout, env, timeout: 90_000 });
      }
      assert.equal(
        r.status,
        0,
        `${block.name} exited ${r.status ?? r.signal}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n--- server\n${server?.output().slice(-3000)}`,
      );
    });
  }

  it("leaves nothing in the checkout but .data", () => {
    const left = readdirSync(checkout).filter((f) => f !== ".data" && !linked.includes(f));
    assert.deepEqual(left, []);
    const added = [...untracked()].filter((p) => !untrackedBefore.has(p));
    assert.deepEqual(added, [], "the blocks left untracked files in the repository");
  });
});

/** The environment without SVC_* (a developer's own key or base URL must not leak into the blocks). */
function withoutSvc(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !k.startsWith("SVC_")));
}
