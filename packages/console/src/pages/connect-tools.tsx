export function ConnectToolsPage() {
  return <p className="empty">Connect your tools: not built yet.</p>;
}
