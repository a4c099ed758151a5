import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";

describe("ListVMMonitoring pageSize (AIP-158)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let p: SeededProject;
  before(async () => {
    t = await startTestApp(dialect);
    p = await t.seedProject("pages", ["vm-1", "vm-2", "vm-3"]);
  });
  after(() => t?.close());

  const list = (pageSize: number) =>
    t
      .clients(p.owner.session)
      .monitoring.listVMMonitoring({ projectName: p.projectName, pageSize, inventoryOnly: true });

  for (const pageSize of [-5, -1]) {
    it(`refuses pageSize ${pageSize} as invalid_argument naming the field`, async () => {
      await assert.rejects(list(pageSize), (e: unknown) => {
        const err = ConnectError.from(e);
        assert.equal(err.code, Code.InvalidArgument);
        assert.match(err.rawMessage, /^pageSize: /);
        const info = err.findDetails(ErrorInfoSchema)[0];
        assert.equal(info?.reason, "INVALID_FIELD");
        assert.equal(info?.metadata.field, "pageSize");
        return true;
      });
    });
  }

  for (const { pageSize, want } of [
    { pageSize: 0, want: 3 },
    { pageSize: 2, want: 2 },
    { pageSize: 500, want: 3 },
  ]) {
    it(`answers pageSize ${pageSize} with ${want} VMs`, async () => {
      assert.equal((await list(pageSize)).vms.length, want);
    });
  }
});
