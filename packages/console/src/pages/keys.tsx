export function KeysPage() {
  return <p className="empty">API keys: not built yet.</p>;
}
