/** Command-line options the benchmarks share. */

export type BenchBackend = "embedded" | "remote";

/**
 * `--backend embedded|remote` (or `--backend=remote`): where svc keeps its metrics in the run. The
 * default, `embedded`, is the TSDB in svc's process; `remote` puts svc in front of VictoriaMetrics and
 * measures it against VictoriaMetrics alone.
 */
export function backendArg(argv: readonly string[] = process.argv): BenchBackend {
  const i = argv.findIndex((a) => a === "--backend" || a.startsWith("--backend="));
  if (i < 0) return "embedded";
  const value = argv[i].includes("=") ? argv[i].slice("--backend=".length) : argv[i + 1];
  if (value !== "embedded" && value !== "remote")
    throw new Error(`--backend: "${value ?? ""}" is not embedded or remote`);
  return value;
}
