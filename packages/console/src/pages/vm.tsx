// Owned by the VM monitoring page work; replaced in this session.
export function VmPage(props: { location: string; vmId: string }) {
  return (
    <p className="empty">
      VM {props.vmId} in {props.location}: not built yet.
    </p>
  );
}
