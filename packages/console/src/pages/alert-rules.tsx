export function AlertRulesPage() {
  return <p className="empty">Alert rules: not built yet.</p>;
}
export function AlertRulePage(props: { ruleId: string }) {
  return <p className="empty">Alert rule {props.ruleId}: not built yet.</p>;
}
