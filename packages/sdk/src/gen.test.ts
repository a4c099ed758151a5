import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { it } from "node:test";

const root = join(import.meta.dirname, "../../..");

function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

it("the committed generated code matches proto/ (run `npm run generate`)", () => {
  const out = mkdtempSync(join(tmpdir(), "svc-gen-"));
  try {
    const template = readFileSync(join(root, "buf.gen.yaml"), "utf8").replace(
      "out: packages/sdk/src/gen",
      `out: ${out}`,
    );
    const templatePath = join(out, "..", `${out.split("/").pop()}.buf.gen.yaml`);
    writeFileSync(templatePath, template);
    execFileSync(join(root, "node_modules/.bin/buf"), ["generate", "--template", templatePath], {
      cwd: root,
      env: { ...process.env, PATH: `${join(root, "node_modules/.bin")}:${process.env.PATH}` },
      stdio: ["ignore", "pipe", "pipe"],
    });
    rmSync(templatePath);
    const committed = join(root, "packages/sdk/src/gen");
    assert.deepEqual(files(out), files(committed));
    for (const f of files(out)) {
      assert.equal(
        readFileSync(join(committed, f), "utf8"),
        readFileSync(join(out, f), "utf8"),
        `${f} is stale`,
      );
    }
  } catch (e) {
    const stderr = (e as { stderr?: unknown }).stderr;
    if (stderr) throw new Error(`buf generate failed: ${String(stderr)}`);
    throw e;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
