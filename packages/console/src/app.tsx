import { useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useMemo, useState } from "react";
import { Link, Redirect, Route, Switch, useLocation, useParams } from "wouter";
import { type ConsoleSession, readSession, signOut, whenSignedOut } from "./api.ts";
import { Loading } from "./components/ui.tsx";
import { ActivityPage } from "./pages/activity.tsx";
import { AlertRulePage, AlertRulesPage } from "./pages/alert-rules.tsx";
import { CiTrustsPage } from "./pages/ci-trusts.tsx";
import { ConnectToolsPage } from "./pages/connect-tools.tsx";
import { DestinationPage, DestinationsPage } from "./pages/destinations.tsx";
import { IncidentPage, IncidentsPage } from "./pages/incidents.tsx";
import { KeysPage } from "./pages/keys.tsx";
import { LoginPage } from "./pages/login.tsx";
import { ServiceAccountsPage } from "./pages/service-accounts.tsx";
import { VmPage } from "./pages/vm.tsx";
import { VmsPage } from "./pages/vms.tsx";
import { ProjectContext, SessionContext, useSession as useSessionValue } from "./session.tsx";

export function App() {
  const [session, setSession] = useState<ConsoleSession | null | undefined>(undefined);
  const [error, setError] = useState<string>();
  const queries = useQueryClient();

  useEffect(() => {
    readSession()
      .then((s) => setSession(s ?? null))
      .catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)));
    whenSignedOut(() => setSession(null));
  }, []);

  const onSignOut = useCallback(async () => {
    await signOut().catch(() => {});
    queries.clear();
    setSession(null);
  }, [queries]);

  if (error) return <p className="banner banner-error">The console could not reach svc: {error}</p>;
  if (session === undefined) return <Loading what="the console" />;
  if (session === null)
    return (
      <LoginPage
        onSignedIn={(s) => {
          queries.clear();
          setSession(s);
        }}
      />
    );
  return (
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

function ProjectShell() {
  const { project } = useParams<{ project: string }>();
  const { session, signOut } = useSessionValue();
  const [location] = useLocation();
  const membership = session.projects.find((p) => p.name === `projects/${project}`);
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
        <nav className="sidebar" aria-label="Console">
          {NAV.map((s) => (
            <div key={s.section} className="nav-section">
              <div className="nav-title">{s.section}</div>
              {s.items.map((i) => (
                <Link
                  key={i.path}
                  href={i.path}
                  className={location === i.path || location.startsWith(`${i.path}/`) ? "active" : ""}
                >
                  {i.label}
                </Link>
              ))}
            </div>
          ))}
        </nav>
        <main className="content">
          <Switch>
            <Route path="/vms" component={VmsPage} />
            <Route path="/vms/:location/:vm">{(p) => <VmPage location={p.location} vmId={p.vm} />}</Route>
            <Route path="/alerts" component={AlertRulesPage} />
            <Route path="/alerts/:rule">{(p) => <AlertRulePage ruleId={p.rule} />}</Route>
            <Route path="/incidents" component={IncidentsPage} />
            <Route path="/incidents/:incident">{(p) => <IncidentPage incidentId={p.incident} />}</Route>
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
        </main>
      </div>
    </ProjectContext.Provider>
  );
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
