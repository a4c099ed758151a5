// Domains depend on each other one way only (docs/architecture.md, "Folders and their
// dependencies"): no import cycle between the top-level folders of packages/server/src. Every
// relative import of every non-test module counts, `import type` included (a type is a dependency
// too); a module at the top level (app.ts, errors.ts, call-notes.ts, …) is a node of its own.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../packages/server/src/", import.meta.url));
const PACKAGES = fileURLToPath(new URL("../packages/", import.meta.url));

/**
 * Cycles allowed, each named by its sorted domains: none since the test helpers left src/ (issue 49). One
 * listed here fails the test once gone, so the list only shrinks; nothing may be added to it.
 */
const KNOWN: ReadonlySet<string> = new Set<string>();

function* modules(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== "gen" && e.name !== "node_modules") yield* modules(p);
    } else if (/\.tsx?$/.test(e.name) && !/\.test\.tsx?$/.test(e.name)) yield p;
  }
}

/** The domain a module belongs to: its top-level folder, or the module itself at the top level. */
function domainOf(file: string): string {
  const parts = relative(SRC, file).split(sep);
  return parts.length === 1 ? parts[0] : `${parts[0]}/`;
}

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^;]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']|\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)|(?:^|[\s;])import\s*["'](\.{1,2}\/[^"']+)["']/g;

/** domain → domain it imports → the modules that do. */
function dependencies(): Map<string, Map<string, Set<string>>> {
  const deps = new Map<string, Map<string, Set<string>>>();
  for (const file of modules(SRC)) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(file), m[1] ?? m[2] ?? m[3]);
      if (!target.startsWith(SRC)) continue;
      const from = domainOf(file);
      const to = domainOf(target);
      if (from === to) continue;
      const out = deps.get(from) ?? new Map<string, Set<string>>();
      deps.set(from, out);
      const by = out.get(to) ?? new Set<string>();
      out.set(to, by);
      by.add(relative(SRC, file));
    }
  }
  return deps;
}

/** Strongly connected components of more than one domain (Tarjan). */
function cycles(deps: Map<string, Map<string, Set<string>>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of deps.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) === index.get(v)) {
      const part: string[] = [];
      let w: string | undefined;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        part.push(w);
      } while (w !== v);
      if (part.length > 1) found.push(part.sort());
    }
  };
  for (const v of deps.keys()) if (!index.has(v)) visit(v);
  return found;
}

it("no import cycle between the server's domains", () => {
  const deps = dependencies();
  assert.ok((deps.get("audit/")?.size ?? 0) > 0, "the imports were read");
  const found = cycles(deps);
  const name = (c: string[]) => c.map((d) => d.replace(/\/$/, "")).join(" ");
  const explain = (c: string[]) =>
    c
      .flatMap((a) =>
        [...(deps.get(a) ?? [])]
          .filter(([b]) => c.includes(b))
          .map(([b, by]) => `  ${a} → ${b}: ${[...by].sort().join(", ")}`),
      )
      .join("\n");
  const unexpected = found.filter((c) => !KNOWN.has(name(c)));
  assert.deepEqual(
    unexpected.map(name),
    [],
    `import cycles between domains (break one edge):\n${unexpected.map(explain).join("\n")}`,
  );
  const gone = [...KNOWN].filter((k) => !found.some((c) => name(c) === k));
  assert.deepEqual(gone, [], "a known cycle is gone: take it off KNOWN");
});

it("no production module imports a test helper (packages/*/testing/)", () => {
  const offenders: string[] = [];
  for (const pkg of readdirSync(PACKAGES)) {
    const src = join(PACKAGES, pkg, "src");
    if (!existsSync(src)) continue;
    for (const file of modules(src)) {
      for (const m of readFileSync(file, "utf8").matchAll(IMPORT)) {
        const target = resolve(dirname(file), m[1] ?? m[2] ?? m[3]);
        if (/^[^/]+\/testing\//.test(relative(PACKAGES, target)))
          offenders.push(`${relative(PACKAGES, file)} → ${m[1]}`);
      }
    }
  }
  assert.deepEqual(offenders, [], "test helpers stay out of production code");
});
