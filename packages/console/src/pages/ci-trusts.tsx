export function CiTrustsPage() {
  return <p className="empty">CI trusts: not built yet.</p>;
}
