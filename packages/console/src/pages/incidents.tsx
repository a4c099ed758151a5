export function IncidentsPage() {
  return <p className="empty">Incidents: not built yet.</p>;
}
export function IncidentPage(props: { incidentId: string }) {
  return <p className="empty">Incident {props.incidentId}: not built yet.</p>;
}
