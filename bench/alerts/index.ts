// `npm run bench:alerts`: the evaluator against Prometheus's rule group (main.ts), or with
// `--projects N` the evaluator at a provider's scale, many small projects (provider.ts).
if (process.argv.includes("--projects")) await (await import("./provider.ts")).providerBench();
else await import("./main.ts");

export {};
