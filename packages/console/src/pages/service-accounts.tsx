export function ServiceAccountsPage() {
  return <p className="empty">Service accounts: not built yet.</p>;
}
