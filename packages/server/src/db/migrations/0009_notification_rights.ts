import type { Kysely } from "kysely";

/**
 * Least privilege for notification routes (issue 34). Destinations remember who created them and,
 * while a webhook or chat URL set by a key or CI token waits for a person's confirmation, which
 * credential set it (`unconfirmed_by`, "" once confirmed or when a person set it).
 *
 * Keys, service accounts and CI trusts are not rewritten: their stored capabilities keep exactly the
 * rights docs/api.md#capabilities defines (`monitoring.write` = saving alert rules). The destination-managing methods
 * moved to the new `notifications.write`, which no existing credential holds; a key that needs it is
 * created anew by someone who holds it (docs/decisions.md). Existing destinations were made under the
 * old rule by people or write keys alike and stay active (creator unknown: "").
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("destinations")
    .addColumn("creator", "text", (c) => c.notNull().defaultTo(""))
    .execute();
  await db.schema
    .alterTable("destinations")
    .addColumn("unconfirmed_by", "text", (c) => c.notNull().defaultTo(""))
    .execute();
}
