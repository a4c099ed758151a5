export function DestinationsPage() {
  return <p className="empty">Destinations: not built yet.</p>;
}
export function DestinationPage(props: { destinationId: string }) {
  return <p className="empty">Destination {props.destinationId}: not built yet.</p>;
}
