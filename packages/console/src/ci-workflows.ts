/**
 * The GitHub Actions workflows the CI trust screens show (docs/github-actions.md), plain functions so a
 * test runs their shell steps (test/console/ci-workflow.test.ts). Each installs the svc CLI from the svc
 * it talks to, checked against the SHA-256 the server publishes beside it (issue 27, item 10).
 */

/** The declared identity of a trust (IntendedCIIdentity's fields the workflows use). */
export interface WorkflowIdentity {
  readonly workflow?: string;
  readonly branch?: string;
  readonly environment?: string;
  readonly event?: string;
}

/** Where the server publishes the packed CLI and its SHA256SUMS (server: ingest/agent-package.ts). */
export const CLI_PACKAGE_PATH = "/v1/cli/packages";

function trigger(intended: WorkflowIdentity | undefined, scheduleNote: string): string {
  const branch = intended?.branch ?? "";
  const event = intended?.event ?? "push";
  if (event === "push") return branch ? `  push:\n    branches: [${branch}]` : "  push:";
  if (event === "schedule") return `  schedule:\n    - cron: "*/15 * * * *"${scheduleNote}`;
  return "  workflow_dispatch:";
}

/**
 * The steps that install the CLI: Node.js, then the package named by the server's SHA256SUMS, refused
 * unless its SHA-256 matches, installed globally. Files go to the runner's temporary folder, not the checkout.
 */
export function installCliSteps(): string[] {
  return [
    "      - uses: actions/setup-node@v4",
    "        with:",
    "          node-version: 20",
    "      - name: Install the svc CLI from svc (checked against its SHA-256)",
    "        run: |",
    '          cd "$RUNNER_TEMP"',
    `          curl -fsSLo SHA256SUMS "$SVC_BASE_URL${CLI_PACKAGE_PATH}/SHA256SUMS"`,
    "          CLI_TGZ=\"$(awk 'NR == 1 { print $2 }' SHA256SUMS)\"",
    `          curl -fsSLo "$CLI_TGZ" "$SVC_BASE_URL${CLI_PACKAGE_PATH}/$CLI_TGZ"`,
    "          sha256sum --check --strict SHA256SUMS",
    '          npm install --global --no-audit --no-fund "./$CLI_TGZ"',
  ];
}

/** The workflow file the setup form suggests: a file of its own, so committing it replaces nothing. */
export const SUGGESTED_WORKFLOW = ".github/workflows/svc-monitoring.yml";

/**
 * Why GitHub's hosted runners cannot reach `origin`, or undefined when it looks public: a loopback,
 * private (RFC 1918, RFC 4193), link-local or CGNAT address, or a name only a local network resolves.
 */
export function nonPublicOrigin(origin: string): string | undefined {
  let host: string;
  try {
    host = new URL(origin).hostname.toLowerCase().replace(/^\[|\]$/g, "");
  } catch {
    return "not a URL";
  }
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(host)?.slice(1).map(Number);
  if (host === "localhost" || host.endsWith(".localhost") || host === "::1" || v4?.[0] === 127)
    return "a loopback address (this machine only)";
  if (v4) {
    const [a, b] = v4;
    if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168))
      return "a private network address";
    if (a === 169 && b === 254) return "a link-local address";
    if (a === 100 && b >= 64 && b <= 127) return "a carrier-grade NAT address";
    if (a === 0) return "not a routable address";
    return undefined;
  }
  if (host.includes(":")) {
    if (/^f[cd]/.test(host)) return "a private network address";
    if (/^fe[89ab]/.test(host)) return "a link-local address";
    return undefined;
  }
  if (!host.includes(".") || /\.(local|internal|lan|home|corp|intranet|localdomain|home\.arpa)$/.test(host))
    return "a name only a local network resolves";
  return undefined;
}

/** The temporary verification workflow for the declared identity, talking to `apiOrigin`. */
export function verificationWorkflow(
  setupId: string,
  audience: string,
  apiOrigin: string,
  intended?: WorkflowIdentity,
): string {
  const environment = intended?.environment ?? "";
  return [
    `# ${intended?.workflow || SUGGESTED_WORKFLOW}: a whole workflow. Commit it as a new file; if that file`,
    "# already exists, add only the job below to it (pasting over it would replace that workflow).",
    "name: svc trust verification",
    "on:",
    trigger(intended, "   # GitHub runs schedules from the default branch"),
    "permissions:",
    "  id-token: write   # lets the job request an OIDC identity token",
    "  contents: read",
    "jobs:",
    "  verify-svc-trust:",
    "    runs-on: ubuntu-latest",
    ...(environment ? [`    environment: ${environment}`] : []),
    "    env:",
    `      SVC_BASE_URL: ${apiOrigin}`,
    "    steps:",
    ...installCliSteps(),
    "      # Temporary: remove this step and the SVC_SETUP_CODE secret once the trust is approved.",
    "      - name: Show svc this job's identity",
    `        run: svc auth ci verify --setup-id ${setupId} --audience "${audience}"`,
    "        env:",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: GitHub Actions expressions, not JS
    "          SVC_SETUP_CODE: ${{ secrets.SVC_SETUP_CODE }}",
  ].join("\n");
}

/** The real job once the trust is approved (docs/github-actions.md §4). */
export function exchangeWorkflow(
  t: { readonly name: string; readonly audience: string; readonly intended?: WorkflowIdentity },
  projectName: string,
  apiOrigin: string,
): string {
  return [
    "on:",
    trigger(t.intended, ""),
    "permissions:",
    "  id-token: write",
    "  contents: read",
    "jobs:",
    "  report:",
    "    runs-on: ubuntu-latest",
    ...(t.intended?.environment ? [`    environment: ${t.intended.environment}`] : []),
    "    env:",
    `      SVC_BASE_URL: ${apiOrigin}`,
    `      SVC_TRUST: ${t.name}`,
    `      SVC_AUDIENCE: ${t.audience}`,
    "    steps:",
    ...installCliSteps(),
    "      # stdout carries only the token, masked in the log first; valid 15 minutes, exchange in each job.",
    "      - name: List the project's VMs with a 15-minute token",
    "        run: |",
    '          SVC_TOKEN="$(svc auth ci --trust "$SVC_TRUST" --audience "$SVC_AUDIENCE")"',
    '          curl -sf "$SVC_BASE_URL/svc.monitoring.v1.MonitoringService/ListVMMonitoring" \\',
    '            -H "Authorization: Bearer $SVC_TOKEN" -H "Content-Type: application/json" \\',
    '            -H "Connect-Protocol-Version: 1" \\',
    `            -d '{"projectName":"${projectName}","pageSize":50,"inventoryOnly":true}'`,
  ].join("\n");
}

/**
 * The shell of each `run:` step of a workflow, in order, with the job's `env:` and the step's own
 * `env:` (values as written; `${{ }}` expressions are left for the caller to replace).
 */
export function runSteps(workflow: string): { script: string; env: Record<string, string> }[] {
  const lines = workflow.split("\n");
  const jobEnv: Record<string, string> = {};
  const steps: { script: string; env: Record<string, string> }[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] === "    env:") {
      for (i++; i < lines.length && /^ {6}\S/.test(lines[i]); i++) {
        const [k, ...v] = lines[i].trim().split(": ");
        jobEnv[k] = v.join(": ");
      }
      i--;
      continue;
    }
    const m = /^ {8}run: ?(.*)$/.exec(lines[i]);
    if (!m) continue;
    const body: string[] = [];
    if (m[1] === "|")
      for (i++; i < lines.length && lines[i].startsWith("          "); i++) body.push(lines[i].slice(10));
    else {
      body.push(m[1]);
      i++;
    }
    const env: Record<string, string> = { ...jobEnv };
    if (lines[i] === "        env:")
      for (i++; i < lines.length && lines[i].startsWith("          "); i++) {
        const [k, ...v] = lines[i].trim().split(": ");
        env[k] = v.join(": ");
      }
    i--;
    steps.push({ script: body.join("\n"), env });
  }
  return steps;
}
