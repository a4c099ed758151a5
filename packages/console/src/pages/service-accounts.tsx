import type { ServiceAccount } from "@gen/svc/iam/v1/service_account_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "wouter";
import { api } from "../api.ts";
import { CapabilityBadges, ConfirmDialog, TEMPLATES, Time } from "../components/access-ui.tsx";
import { RecentActivity } from "../components/audit-events.tsx";
import { Badge, Button, Dialog, Empty, ErrorBanner, Field, Loading, Page } from "../components/ui.tsx";
import { lastSegment } from "../format.ts";
import { useProject } from "../session.tsx";
import { KeyList, keysQueryKey } from "./keys.tsx";

export const serviceAccountsQueryKey = (project: string) => ["serviceAccounts", project];

/** Service accounts: unattended identities from a template, enabled or disabled, with their keys. */
export function ServiceAccountsPage() {
  const project = useProject();
  // Server side, service accounts and their keys are managed by owners only.
  const isOwner = project.role === "owner";
  const queries = useQueryClient();
  const q = useQuery({
    queryKey: serviceAccountsQueryKey(project.name),
    queryFn: () => api.serviceAccounts.listServiceAccounts({ parent: project.name }),
  });
  const [creating, setCreating] = useState(false);
  const [selected, setSelected] = useState<string>();
  const [toggling, setToggling] = useState<ServiceAccount>();
  const accounts = q.data?.serviceAccounts ?? [];
  const current = accounts.find((a) => a.name === selected);
  // The selected account's keys, shared with its KeyList: a create, rotate or revoke refetches them,
  // and then its recent activity too.
  const currentKeys = useQuery({
    queryKey: keysQueryKey(current?.name ?? ""),
    queryFn: () => api.keys.listKeys({ parent: current?.name ?? "" }),
    enabled: isOwner && current !== undefined,
  });
  const refresh = () => queries.invalidateQueries({ queryKey: serviceAccountsQueryKey(project.name) });
  return (
    <Page
      title="Service accounts"
      subtitle="Project identities for tools and pipelines, created from a permission template. Their keys and CI tokens never exceed the account's permissions."
      actions={
        isOwner ? (
          <Button kind="primary" className="access-nowrap" onClick={() => setCreating(true)}>
            Create service account
          </Button>
        ) : null
      }
    >
      {!isOwner ? (
        <p className="banner banner-info">
          You can see the project's service accounts; only owners create, disable or give them keys.
        </p>
      ) : null}
      <ErrorBanner error={q.error} title="Could not list service accounts" />
      {q.isPending ? (
        <Loading what="service accounts" />
      ) : accounts.length === 0 ? (
        <Empty>
          No service accounts yet.{" "}
          {isOwner ? "Create one from the Metrics scraper or Alert manager template." : null}
        </Empty>
      ) : (
        <div className="access-table-wrap">
          <table className="table access-table" data-testid="sa-table">
            <thead>
              <tr>
                <th>Name</th>
                <th>Template</th>
                <th>Permissions</th>
                <th>State</th>
                <th>Created</th>
                <th>Last used</th>
                {isOwner ? <th className="access-actions-col">Actions</th> : null}
              </tr>
            </thead>
            <tbody>
              {accounts.map((sa) => (
                <tr
                  key={sa.name}
                  className={`${sa.state === "DISABLED" ? "access-inactive" : ""} ${selected === sa.name ? "access-selected" : ""}`}
                >
                  <td>
                    <div>{sa.displayName}</div>
                    <div className="muted small mono">{lastSegment(sa.name)}</div>
                  </td>
                  <td>{sa.template}</td>
                  <td>
                    <CapabilityBadges capabilities={sa.permissions} />
                  </td>
                  <td>
                    {sa.state === "ACTIVE" ? (
                      <Badge tone="ok">active</Badge>
                    ) : (
                      <Badge tone="bad" title="its keys and CI tokens are refused">
                        disabled
                      </Badge>
                    )}
                  </td>
                  <td>
                    <Time unix={sa.createTimeUnix} />
                  </td>
                  <td>
                    {sa.lastUsedTimeUnix > 0n ? (
                      <>
                        <Time unix={sa.lastUsedTimeUnix} />
                        <div className="muted small mono">{sa.lastClientAddress}</div>
                      </>
                    ) : (
                      <span className="muted">never</span>
                    )}
                  </td>
                  {isOwner ? (
                    <td className="access-actions-col">
                      <div className="row access-row-actions">
                        <Button
                          className={selected === sa.name ? "selected" : ""}
                          aria-label={`Keys of ${sa.displayName}`}
                          onClick={() => setSelected(selected === sa.name ? undefined : sa.name)}
                        >
                          Keys
                        </Button>
                        {sa.state === "ACTIVE" ? (
                          <Button
                            kind="danger"
                            aria-label={`Disable ${sa.displayName}`}
                            onClick={() => setToggling(sa)}
                          >
                            Disable
                          </Button>
                        ) : (
                          <Button aria-label={`Enable ${sa.displayName}`} onClick={() => setToggling(sa)}>
                            Enable
                          </Button>
                        )}
                      </div>
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {current && isOwner ? (
        <div className="access-below">
          <KeyList
            parent={current.name}
            title={<>Keys of {current.displayName}</>}
            description={
              current.state === "DISABLED" ? (
                "The account is disabled: these keys are refused until it is enabled again."
              ) : (
                <>
                  Keys act as this account, within its permissions. All keys of the project:{" "}
                  <Link href="/keys">API keys</Link>.
                </>
              )
            }
            allowed={current.permissions}
            defaultTemplate={current.template}
            canManage
          />
          <RecentActivity
            resource={current.name}
            title={`Recent activity of ${current.displayName} and its keys`}
            changed={[current.state, currentKeys.dataUpdatedAt]}
          />
        </div>
      ) : null}
      <Dialog title="Create service account" open={creating} onClose={() => setCreating(false)}>
        <CreateServiceAccountForm
          onClose={() => setCreating(false)}
          onCreated={(sa) => {
            setSelected(sa.name);
            void refresh();
          }}
        />
      </Dialog>
      <ConfirmDialog
        open={toggling !== undefined}
        title={`${toggling?.state === "ACTIVE" ? "Disable" : "Enable"} ${toggling?.displayName ?? ""}`}
        confirmLabel={toggling?.state === "ACTIVE" ? "Disable now" : "Enable"}
        danger={toggling?.state === "ACTIVE"}
        onClose={() => setToggling(undefined)}
        onConfirm={async () => {
          if (!toggling) return;
          if (toggling.state === "ACTIVE")
            await api.serviceAccounts.disableServiceAccount({ name: toggling.name });
          else await api.serviceAccounts.enableServiceAccount({ name: toggling.name });
          await refresh();
          await queries.invalidateQueries({ queryKey: ["ciTrusts", project.name] });
        }}
      >
        {toggling?.state === "ACTIVE" ? (
          <>
            <p>
              Disable <strong>{toggling.displayName}</strong>? Every key of the account and every CI token
              exchanged through its trusts <strong>stops working at once</strong>: the next request is refused
              (<code>IDENTITY_DISABLED</code>), and CI exchanges for it fail.
            </p>
            <p className="muted">
              Nothing is deleted or revoked: enabling the account again makes its unexpired, unrevoked keys
              work again. To retire one key for good, revoke it instead.
            </p>
          </>
        ) : (
          <p>
            Enable <strong>{toggling?.displayName}</strong>? Its unexpired, unrevoked keys and approved CI
            trusts work again from the next request.
          </p>
        )}
      </ConfirmDialog>
    </Page>
  );
}

function CreateServiceAccountForm(props: { onClose: () => void; onCreated: (sa: ServiceAccount) => void }) {
  const project = useProject();
  const [name, setName] = useState("");
  const [template, setTemplate] = useState(TEMPLATES[0].name);
  const [touched, setTouched] = useState(false);
  const nameError =
    name.trim().length === 0
      ? "A name is required"
      : name.trim().length > 100
        ? "At most 100 characters"
        : undefined;
  const m = useMutation({
    mutationFn: () =>
      api.serviceAccounts.createServiceAccount({
        parent: project.name,
        displayName: name.trim(),
        template,
      }),
    onSuccess: (sa) => {
      props.onCreated(sa);
      props.onClose();
    },
  });
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (!nameError) m.mutate();
      }}
    >
      <Field
        label="Name"
        hint="What the account is for, e.g. prometheus-scraper"
        error={touched ? nameError : undefined}
      >
        <input value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />
      </Field>
      <fieldset className="access-templates">
        <legend className="field-label">Template</legend>
        {TEMPLATES.map((t) => (
          <label key={t.name} className={`access-template ${template === t.name ? "selected" : ""}`}>
            <input
              type="radio"
              name="sa-template"
              value={t.name}
              checked={template === t.name}
              onChange={() => setTemplate(t.name)}
            />
            <span>
              <span className="access-template-title">
                <strong>{t.name}</strong> <CapabilityBadges capabilities={t.capabilities} />
              </span>
              <span className="hint">{t.blurb}</span>
            </span>
          </label>
        ))}
      </fieldset>
      <p className="muted small">
        No template grants VM changes, console access or identity administration. The account starts active
        with no keys; create a key or a CI trust for it next.
      </p>
      <ErrorBanner error={m.error} title="Could not create the service account" />
      <div className="access-dialog-actions">
        <Button onClick={props.onClose}>Cancel</Button>
        <Button kind="primary" type="submit" busy={m.isPending}>
          Create
        </Button>
      </div>
    </form>
  );
}
