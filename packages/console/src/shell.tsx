import { Code, ConnectError } from "@connectrpc/connect";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { Suspense, useLayoutEffect, useMemo, useRef, useState } from "react";
import { Link, Redirect, Route, Switch, useLocation, useParams } from "wouter";
import { fromChunk, pages } from "./chunks.ts";
import { installPersonCopy } from "./components/person-copy.ts";
import { useScrollableTablesFocusable } from "./components/scroll-focus.ts";
import { Loading, navigated } from "./components/ui.tsx";
import { useOpenIncidents } from "./open-incidents.ts";
import { ProjectContext, SessionContext, useSession as useSessionValue } from "./session.tsx";
import type { ConsoleSession } from "./session-api.ts";

/*
 * The signed-in console, loaded after sign-in (app.tsx) with each page in a chunk of its own: the sign-in
 * page downloads none of it, and a page brings only what it draws (uPlot with the charts).
 */
const AlertRulePage = fromChunk(pages.alertRules, (m) => m.AlertRulePage);
const AlertRulesPage = fromChunk(pages.alertRules, (m) => m.AlertRulesPage);
const CiTrustsPage = fromChunk(pages.ciTrusts, (m) => m.CiTrustsPage);
const ConnectToolsPage = fromChunk(pages.connectTools, (m) => m.ConnectToolsPage);
const DestinationPage = fromChunk(pages.destinations, (m) => m.DestinationPage);
const DestinationsPage = fromChunk(pages.destinations, (m) => m.DestinationsPage);
const IncidentPage = fromChunk(pages.incidents, (m) => m.IncidentPage);
const IncidentsPage = fromChunk(pages.incidents, (m) => m.IncidentsPage);
const ActivityPage = fromChunk(pages.activity, (m) => m.ActivityPage);
const SilencesPage = fromChunk(pages.silences, (m) => m.SilencesPage);
const KeysPage = fromChunk(pages.keys, (m) => m.KeysPage);
const ServiceAccountsPage = fromChunk(pages.serviceAccounts, (m) => m.ServiceAccountsPage);
const VmPage = fromChunk(pages.vm, (m) => m.VmPage);
const VmsPage = fromChunk(pages.vms, (m) => m.VmsPage);

/** Answers that will not change on a retry (not found, refused, invalid): asking again only repeats them. */
const FINAL = new Set([
  Code.NotFound,
  Code.InvalidArgument,
  Code.PermissionDenied,
  Code.Unauthenticated,
  Code.FailedPrecondition,
]);

/** One query cache per signed-in session: signing out drops it with the shell. */
function newQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      // Monitoring data moves every 30 s: refetch on focus, keep the last answer while refetching; one
      // retry for what may pass a moment later.
      queries: {
        staleTime: 15_000,
        retry: (failures, err) => failures < 1 && !(err instanceof ConnectError && FINAL.has(err.code)),
        refetchOnWindowFocus: true,
      },
    },
  });
}

export default function SignedIn(props: { session: ConsoleSession; onSignOut: () => Promise<void> }) {
  const { session, onSignOut } = props;
  const [queries] = useState(newQueryClient);
  return (
    <QueryClientProvider client={queries}>
      <SessionContext.Provider value={{ session, signOut: onSignOut }}>
        <Switch>
          <Route path="/projects/:project" nest>
            <ProjectShell />
          </Route>
          <Route>
            {session.projects[0] ? (
              <Redirect to={`/${session.projects[0].name}/vms`} replace />
            ) : (
              <NoProjects email={session.email} onSignOut={onSignOut} />
            )}
          </Route>
        </Switch>
      </SessionContext.Provider>
    </QueryClientProvider>
  );
}

function NoProjects(props: { email: string; onSignOut: () => void }) {
  return (
    <div className="centered">
      <h1>No projects</h1>
      <p>{props.email} is not a member of any project yet. Ask a project owner to add you.</p>
      <button type="button" className="btn btn-plain" onClick={props.onSignOut}>
        Sign out
      </button>
    </div>
  );
}

const NAV: { section: string; items: { path: string; label: string }[] }[] = [
  { section: "Monitoring", items: [{ path: "/vms", label: "Virtual machines" }] },
  {
    section: "Alerting",
    items: [
      { path: "/alerts", label: "Alert rules" },
      { path: "/incidents", label: "Incidents" },
      { path: "/silences", label: "Silences" },
      { path: "/destinations", label: "Destinations" },
    ],
  },
  {
    section: "Access",
    items: [
      { path: "/keys", label: "API keys" },
      { path: "/service-accounts", label: "Service accounts" },
      { path: "/ci-trusts", label: "CI trusts" },
      { path: "/activity", label: "Activity" },
    ],
  },
  { section: "Integrations", items: [{ path: "/connect", label: "Connect your tools" }] },
];

/** Unattended open incidents beside "Incidents" in the navigation (issue 27, item 7). */
function NavIncidentCount(props: { projectName: string; testId?: string }) {
  const open = useOpenIncidents(props.projectName);
  const n = open.data?.firing.length ?? 0;
  if (n === 0) return null;
  return (
    <span
      className="nav-count"
      data-testid={props.testId ?? "nav-incident-count"}
      title={`${n}${open.data?.truncated ? " or more" : ""} open incident${n === 1 ? "" : "s"} nobody has acknowledged`}
    >
      {" "}
      {n}
      {open.data?.truncated ? "+" : ""}
      <span className="sr-only"> unacknowledged</span>
    </span>
  );
}

function ProjectShell() {
  const { project } = useParams<{ project: string }>();
  const { session, signOut } = useSessionValue();
  const [location] = useLocation();
  const membership = session.projects.find((p) => p.name === `projects/${project}`);
  // A route change moves focus to the new page's heading (components/ui.tsx Page), so a screen reader
  // announces it; the first load leaves focus at the top, where the skip link is.
  const shown = useRef(location);
  // On a phone the navigation is a menu, closed again by choosing a page.
  const [menuOpen, setMenuOpen] = useState(false);
  useScrollableTablesFocusable(mainElement);
  useLayoutEffect(() => installPersonCopy(document), []);
  useLayoutEffect(() => {
    if (shown.current !== location) navigated();
    shown.current = location;
    setMenuOpen(false);
  }, [location]);
  const ctx = useMemo(
    () =>
      membership
        ? {
            id: project,
            name: membership.name,
            role: membership.role,
            canWrite: membership.role === "owner" || membership.role === "editor",
          }
        : undefined,
    [membership, project],
  );
  if (!ctx) {
    return (
      <div className="centered">
        <h1>Project not found</h1>
        <p>
          You are not a member of <code>projects/{project}</code>.
        </p>
        <a href="/">Back to your projects</a>
      </div>
    );
  }
  return (
    <ProjectContext.Provider value={ctx}>
      <div className="shell">
        {/* biome-ignore lint/a11y/useValidAnchor: a skip link; #main is its no-script fallback */}
        <a
          className="skip-link"
          href="#main"
          onClick={(e) => {
            e.preventDefault();
            focusMain();
          }}
        >
          Skip to content
        </a>
        <header className="topbar">
          <a className="brand" href="/">
            svc
          </a>
          <ProjectSwitch current={ctx.name} projects={session.projects} />
          <span className="spacer" />
          <span className="muted user" title={session.user}>
            {session.email} · {ctx.role}
          </span>
          <button type="button" className="btn btn-plain" onClick={() => void signOut()}>
            Sign out
          </button>
        </header>
        <nav className={`sidebar ${menuOpen ? "open" : ""}`} aria-label="Console">
          <button
            type="button"
            className="btn btn-plain menu-toggle"
            aria-expanded={menuOpen}
            aria-controls="console-nav-sections"
            onClick={() => setMenuOpen(!menuOpen)}
          >
            {menuOpen ? "Close menu" : "Menu"}
            {/* Closed, the menu still shows that something is firing (the count is inside it). */}
            {!menuOpen && membership ? (
              <NavIncidentCount projectName={membership.name} testId="menu-incident-count" />
            ) : null}
          </button>
          <div id="console-nav-sections" className="nav-sections">
            {NAV.map((s) => (
              <div key={s.section} className="nav-section">
                <div className="nav-title">{s.section}</div>
                {s.items.map((i) => {
                  const active = location === i.path || location.startsWith(`${i.path}/`);
                  return (
                    <Link
                      key={i.path}
                      href={i.path}
                      className={active ? "active" : ""}
                      // "page" on the link to exactly this page, "location" on a section's link from its sub-page.
                      aria-current={location === i.path ? "page" : active ? "location" : undefined}
                    >
                      {i.label}
                      {i.path === "/incidents" && membership ? (
                        <NavIncidentCount projectName={membership.name} />
                      ) : null}
                    </Link>
                  );
                })}
              </div>
            ))}
          </div>
        </nav>
        <main className="content" id="main" tabIndex={-1}>
          <Suspense fallback={<Loading what="the page" />}>
            <Switch>
              <Route path="/vms" component={VmsPage} />
              <Route path="/vms/:location/:vm">{(p) => <VmPage location={p.location} vmId={p.vm} />}</Route>
              <Route path="/alerts" component={AlertRulesPage} />
              <Route path="/alerts/:rule">{(p) => <AlertRulePage ruleId={p.rule} />}</Route>
              <Route path="/incidents" component={IncidentsPage} />
              <Route path="/incidents/:incident">{(p) => <IncidentPage incidentId={p.incident} />}</Route>
              <Route path="/silences" component={SilencesPage} />
              <Route path="/destinations" component={DestinationsPage} />
              <Route path="/destinations/:destination">
                {(p) => <DestinationPage destinationId={p.destination} />}
              </Route>
              <Route path="/keys" component={KeysPage} />
              <Route path="/service-accounts" component={ServiceAccountsPage} />
              <Route path="/ci-trusts" component={CiTrustsPage} />
              <Route path="/activity" component={ActivityPage} />
              <Route path="/connect" component={ConnectToolsPage} />
              <Route>
                <Redirect to="/vms" replace />
              </Route>
            </Switch>
          </Suspense>
        </main>
      </div>
    </ProjectContext.Provider>
  );
}

const mainElement = () => document.getElementById("main");

/** The skip link's target: the page's heading when there is one, else the main region. */
function focusMain() {
  const main = document.getElementById("main");
  const h1 = main?.querySelector("h1");
  if (h1) {
    h1.tabIndex = -1;
    h1.focus();
  } else main?.focus();
}

function ProjectSwitch(props: { current: string; projects: ConsoleSession["projects"] }) {
  if (props.projects.length < 2) return <span className="project-name">{props.current}</span>;
  return (
    <select
      className="project-switch"
      aria-label="Project"
      value={props.current}
      onChange={(e) => {
        window.location.href = `/${e.target.value}/vms`;
      }}
    >
      {props.projects.map((p) => (
        <option key={p.name} value={p.name}>
          {p.displayName || p.name}
        </option>
      ))}
    </select>
  );
}
