import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type NotificationMessage, webhookPayload } from "../message.ts";
import { discordLimits } from "./discord.ts";
import { factsOf, fit } from "./format.ts";
import { render, renderDiscord, renderSlack, renderTeams, renderWebhook } from "./index.ts";
import { slackLimits } from "./slack.ts";

const firing: NotificationMessage = {
  type: "incident.opened",
  deliveryId: "d-1",
  timeUnix: 1_767_225_600,
  project: "projects/demo",
  incident: {
    name: "projects/demo/incidents/i-1",
    state: "OPEN",
    severity: "CRITICAL",
    metricId: "cpu_utilization_pct",
    operator: "GREATER_THAN",
    threshold: 90,
    firingValue: 96.123456789,
    lastValue: 97.5,
    openTimeUnix: 1_767_225_600,
  },
  rule: { name: "projects/demo/alertRules/r-1", displayName: "High CPU utilization", version: "3" },
  vm: { name: "projects/demo/vms/web-2" },
  summary: "FIRING: High CPU utilization on web-2 (96.1 > 90)",
  link: "https://svc.example/projects/p1/incidents/i-1",
};

// A display name far past every limit, with what each provider would otherwise interpret: Slack's
// <…|…> links and &entities, Discord markdown and mentions, and emoji (surrogate pairs) at the cuts.
const longName = `${"<!channel> *bold* [x](https://evil.example) @everyone & 🔥 ".repeat(120)}END`;
const long: NotificationMessage = {
  ...firing,
  rule: { ...firing.rule!, displayName: longName },
  vm: { name: "projects/demo/vms/web-2", mountpoint: "/var/lib/data" },
  summary: `FIRING: ${longName} on web-2 (96.1 > 90)`,
};
const resolved: NotificationMessage = {
  ...firing,
  type: "incident.resolved",
  incident: { ...firing.incident!, state: "RESOLVED", closeTimeUnix: 1_767_229_200 },
  summary: "RESOLVED: High CPU utilization on web-2",
};
const test: NotificationMessage = {
  type: "test",
  deliveryId: "d-2",
  timeUnix: 1_767_225_600,
  project: "projects/demo",
  summary: "Test notification from svc",
  link: "https://svc.example/projects/p1/destinations/x",
};

/** Every string anywhere in a JSON value. */
function strings(v: unknown): string[] {
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v.flatMap(strings);
  if (v && typeof v === "object") return Object.values(v).flatMap(strings);
  return [];
}

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

describe("notify/channels", () => {
  it("fit cuts with an ellipsis, never inside an escape or a surrogate pair", () => {
    assert.equal(fit("short", 10), "short");
    assert.equal(fit("abcdefghij", 5), "abcd…");
    assert.equal(fit("abc🔥def", 5), "abc…");
    const esc = (s: string) => s.replace(/&/g, "&amp;");
    assert.equal(fit("a&b&c&d", 8), "a&b&c&d");
    assert.equal(fit("a&b&c&d", 8, esc), "a&amp;b…");
    assert.ok(!loneSurrogate.test(fit("🔥".repeat(100), 50)));
  });

  it("facts name the metric by its display name with its unit, never the metricId", () => {
    const facts = (m: NotificationMessage) => Object.fromEntries(factsOf(m).map((f) => [f.label, f.value]));
    assert.equal(facts(firing).Condition, "CPU utilization > 90 %");
    const memory: NotificationMessage = {
      ...firing,
      incident: {
        ...firing.incident!,
        metricId: "memory_used_bytes",
        threshold: 8 * 1024 ** 3,
        firingValue: 8.5 * 1024 ** 3,
        lastValue: undefined,
      },
    };
    const f = facts(memory);
    assert.deepEqual(
      [f.Condition, f["Firing value"], f["Last value"]],
      ["Guest memory used > 8 GiB", "8.5 GiB", undefined],
    );
    // An id the table does not know (a metric added later) is shown as it is, not dropped.
    assert.equal(
      facts({ ...firing, incident: { ...firing.incident!, metricId: "new_metric" } }).Condition,
      "new_metric > 90",
    );
  });

  it("renderSlack: text fallback, header, fields and a link button", () => {
    const p = JSON.parse(renderSlack(firing).body);
    assert.equal(p.text, "FIRING: High CPU utilization on web-2 (96.1 &gt; 90)");
    assert.deepEqual(
      p.blocks.map((b: { type: string }) => b.type),
      ["header", "section", "actions"],
    );
    assert.deepEqual(p.blocks[0].text, {
      type: "plain_text",
      text: ":red_circle: FIRING: High CPU utilization on web-2 (96.1 > 90)",
      emoji: true,
    });
    const fields = p.blocks[1].fields.map((f: { text: string }) => f.text);
    assert.ok(fields.includes("*Severity*\nCRITICAL"));
    assert.ok(fields.includes("*Condition*\nCPU utilization &gt; 90 %"));
    assert.ok(fields.includes("*Firing value*\n96.1235 %"));
    assert.ok(
      fields.includes("*Opened*\n<!date^1767225600^{date_short_pretty} {time_secs}|2026-01-01T00:00:00Z>"),
    );
    assert.deepEqual(p.blocks[2].elements[0], {
      type: "button",
      text: { type: "plain_text", text: "Open incident" },
      url: firing.link,
    });
  });

  it("renderSlack keeps a very long display name within Block Kit's limits", () => {
    const p = JSON.parse(renderSlack(long).body);
    assert.ok(p.text.length <= slackLimits.text && p.text.endsWith("…"));
    const header = p.blocks[0].text.text as string;
    assert.equal(header.length, slackLimits.header);
    assert.ok(header.endsWith("…"));
    const fields = p.blocks[1].fields as { text: string }[];
    assert.ok(fields.length <= slackLimits.fields);
    for (const f of fields) assert.ok(f.text.length <= slackLimits.field, `field of ${f.text.length}`);
    const rule = fields.find((f) => f.text.startsWith("*Rule*"))!.text;
    assert.ok(rule.endsWith("…"));
    // User text cannot make a mention or a link: < and > only appear escaped.
    assert.doesNotMatch(rule, /<|>/);
    for (const s of strings(p)) assert.ok(!loneSurrogate.test(s));
  });

  it("renderTeams: an Adaptive Card 1.4 in a Workflows message", () => {
    const p = JSON.parse(renderTeams(firing).body);
    assert.equal(p.type, "message");
    assert.equal(p.attachments.length, 1);
    const a = p.attachments[0];
    assert.equal(a.contentType, "application/vnd.microsoft.card.adaptive");
    const card = a.content;
    assert.deepEqual(
      [card.$schema, card.type, card.version],
      ["http://adaptivecards.io/schemas/adaptive-card.json", "AdaptiveCard", "1.4"],
    );
    assert.equal(card.body[0].type, "Container");
    assert.equal(card.body[0].style, "attention");
    assert.deepEqual([card.body[0].items[0].type, card.body[0].items[0].text], ["TextBlock", firing.summary]);
    assert.equal(card.body[1].type, "FactSet");
    assert.deepEqual(card.body[1].facts[0], { title: "Severity", value: "CRITICAL" });
    assert.deepEqual(card.actions, [{ type: "Action.OpenUrl", title: "Open incident", url: firing.link }]);
    assert.equal(JSON.parse(renderTeams(resolved).body).attachments[0].content.body[0].style, "good");
  });

  it("renderTeams keeps a very long display name short", () => {
    const body = renderTeams(long).body;
    assert.ok(Buffer.byteLength(body) < 24 * 1024);
    const card = JSON.parse(body).attachments[0].content;
    assert.ok(card.body[0].items[0].text.length <= 400 && card.body[0].items[0].text.endsWith("…"));
    for (const f of card.body[1].facts) assert.ok(f.value.length <= 500);
    for (const s of strings(card)) assert.ok(!loneSurrogate.test(s));
  });

  it("renderDiscord: one embed, colour by severity, and no mentions", () => {
    const p = JSON.parse(renderDiscord(firing).body);
    assert.deepEqual(p.allowed_mentions, { parse: [] });
    assert.equal(p.content, undefined);
    assert.equal(p.embeds.length, 1);
    const e = p.embeds[0];
    assert.deepEqual(
      [e.title, e.url, e.color, e.timestamp],
      [firing.summary, firing.link, 0xd92d20, "2026-01-01T00:00:00Z"],
    );
    assert.equal(e.description, undefined);
    assert.deepEqual(e.fields[0], { name: "Severity", value: "CRITICAL", inline: true });
    assert.ok(e.fields.some((f: { value: string }) => f.value === "CPU utilization \\> 90 %"));
    assert.ok(
      e.fields.some(
        (f: { name: string; value: string }) => f.name === "Opened" && f.value === "<t:1767225600:f>",
      ),
    );
    assert.equal(JSON.parse(renderDiscord(resolved).body).embeds[0].color, 0x12b76a);
  });

  it("renderDiscord keeps a very long display name within the embed limits", () => {
    const p = JSON.parse(renderDiscord(long).body);
    const e = p.embeds[0];
    assert.equal(e.title.length, discordLimits.title);
    assert.ok(e.title.endsWith("…"));
    assert.ok(e.description.length <= discordLimits.description && e.description.endsWith("…"));
    assert.ok(e.fields.length <= discordLimits.fields);
    for (const f of e.fields) {
      assert.ok(f.name.length <= discordLimits.fieldName && f.value.length <= discordLimits.fieldValue);
      assert.ok(f.value.length > 0);
    }
    const total =
      e.title.length +
      e.description.length +
      e.footer.text.length +
      e.fields.reduce(
        (n: number, f: { name: string; value: string }) => n + f.name.length + f.value.length,
        0,
      );
    assert.ok(total <= discordLimits.total, `total ${total}`);
    // Markdown in user text is escaped: no unescaped masked link survives.
    assert.doesNotMatch(e.description, /(?<!\\)\[x(?<!\\)\]/);
    for (const s of strings(p)) assert.ok(!loneSurrogate.test(s));
  });

  it("every channel renders a test send", () => {
    for (const kind of ["WEBHOOK", "SLACK", "TEAMS", "DISCORD"] as const) {
      const body = JSON.parse(render(kind, test).body);
      assert.ok(JSON.stringify(body).includes("Test notification from svc"), kind);
    }
    const facts = JSON.parse(renderSlack(test).body).blocks[1].fields;
    assert.deepEqual(facts, [{ type: "mrkdwn", text: "*Project*\ndemo" }]);
  });

  it("renderWebhook is exactly the documented payload", () => {
    assert.equal(renderWebhook(firing).body, JSON.stringify(webhookPayload(firing)));
    assert.equal(render("WEBHOOK", long).body, JSON.stringify(webhookPayload(long)));
  });

  it("renderWebhook refuses a body over 1 MiB", () => {
    const huge = { ...firing, summary: "x".repeat(1024 * 1024) };
    assert.throws(() => renderWebhook(huge), /exceeds the 1048576-byte limit/);
  });

  it("render dispatches on the kind", () => {
    assert.equal(render("SLACK", firing).body, renderSlack(firing).body);
    assert.equal(render("TEAMS", firing).body, renderTeams(firing).body);
    assert.equal(render("DISCORD", firing).body, renderDiscord(firing).body);
    assert.throws(() => render("EMAIL" as never, firing), /no HTTP channel/);
  });
});
