import type { Transporter } from "nodemailer";
import type { NotificationMessage } from "../message.ts";
import { type Channel, skipped } from "./channel.ts";
import { factsOf, fit, linkLabelOf, oneLine, shortName, titleOf } from "./format.ts";

/** One email to one recipient. */
export interface Mail {
  readonly from: string;
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly html?: string;
}

/** The slice of nodemailer's transporter that notifications use. */
export interface MailSender {
  sendMail(mail: Mail): Promise<unknown>;
  /** Who accepted a sent mail, for delivery history ("the SMTP server", or that it was only logged). */
  readonly acceptedBy?: string;
}

/** Timeouts of one SMTP exchange, ms (nodemailer's defaults wait minutes). */
const SMTP_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 } as const;

/**
 * Sends through the SMTP server of `url`: `smtp://[user:pass@]host[:port]` (STARTTLS when offered;
 * add `?requireTLS=true` to insist) or `smtps://…` (TLS from the start). Other schemes, such as
 * nodemailer's `direct:`, are refused.
 */
export function createSmtpSender(url: string): MailSender & { close(): void } {
  if (!/^smtps?:\/\//i.test(url)) throw new Error("SMTP URL must start with smtp:// or smtps://");
  // nodemailer loads at the first email: a process that sends none never compiles it.
  let transport: Promise<Transporter> | undefined;
  const open = () =>
    (transport ??= import("nodemailer").then((m) => m.createTransport({ url, ...SMTP_TIMEOUTS })));
  return {
    sendMail: async (mail) =>
      (await open()).sendMail({
        from: mail.from,
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        ...(mail.html === undefined ? {} : { html: mail.html }),
      }),
    close: () => void transport?.then((t) => t.close()),
  };
}

/** The slice of a pino logger the log sender uses. */
export interface InfoLogger {
  info(obj: object, msg: string): void;
}

/**
 * For running without SMTP (the demo): logs that an email would have been sent, with its sender,
 * recipient and subject. Never the body: a verification email's body carries its code.
 */
export function createLogSender(log: InfoLogger): MailSender {
  return {
    acceptedBy: "the server log (no SMTP server configured: nothing was sent)",
    async sendMail(mail) {
      log.info(
        { mail: { from: mail.from, to: mail.to, subject: mail.subject, textChars: mail.text.length } },
        "email not sent: no SMTP server configured",
      );
      return { logged: true };
    },
  };
}

/** nodemailer folds and encodes long subjects; one longer than this is cut (clients show far less). */
const SUBJECT_MAX = 200;

const escapeHtml = (s: string) =>
  s
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");

/** An incident notification (or a test send) as an email. */
export function renderIncidentEmail(m: NotificationMessage): { subject: string; text: string; html: string } {
  const title = titleOf(m);
  const facts = factsOf(m);
  const footer = `Sent by svc for ${m.project}. Delivery ${m.deliveryId}.`;
  const subject = fit(`[svc] ${title}`, SUBJECT_MAX);
  const width = Math.max(...facts.map((f) => f.label.length), 0) + 1;
  const text = [
    title,
    "",
    ...facts.map((f) => `${`${f.label}:`.padEnd(width)} ${f.value}`),
    "",
    ...(m.link ? [`${linkLabelOf(m)}: ${m.link}`, ""] : []),
    "-- ",
    footer,
    "",
  ].join("\n");
  const rows = facts
    .map(
      (f) =>
        `<tr><th align="left" style="padding:2px 12px 2px 0">${escapeHtml(f.label)}</th><td>${escapeHtml(f.value)}</td></tr>`,
    )
    .join("\n");
  const html = [
    "<!doctype html>",
    '<html><body style="font-family:sans-serif">',
    `<h2 style="margin:0 0 12px">${escapeHtml(title)}</h2>`,
    `<table>\n${rows}\n</table>`,
    m.link ? `<p><a href="${escapeHtml(m.link)}">${escapeHtml(linkLabelOf(m))}</a></p>` : "",
    `<p style="color:#667085;font-size:12px">${escapeHtml(footer)}</p>`,
    "</body></html>",
    "",
  ].join("\n");
  return { subject, text, html };
}

/**
 * The double opt-in email sent to a recipient added to an email destination. The code appears in
 * the body only, never in the subject (subjects are logged and shown in previews).
 */
export function renderVerificationEmail(v: {
  readonly projectName: string;
  readonly destinationName: string;
  readonly code: string;
  readonly link: string;
}): { subject: string; text: string } {
  const project = shortName(v.projectName);
  const destination = oneLine(v.destinationName);
  const subject = fit(`[svc] Confirm alert emails from project ${project}`, SUBJECT_MAX);
  const text = [
    `You were added as a recipient of the email destination "${destination}" in the svc project ${v.projectName}.`,
    "",
    "To receive its alert notifications, confirm with this code:",
    "",
    `    ${v.code}`,
    "",
    `Enter it at ${v.link}`,
    "",
    "If you did not expect this, ignore this email: nothing is sent to you until you confirm.",
    "",
  ].join("\n");
  return { subject, text };
}

/**
 * Email: the destination's recipients still verified and still members of the project, read at every
 * attempt; each gets the message. One refused recipient fails the attempt (the retry mails them all).
 */
export const emailChannel: Channel = {
  async send({ db, destination: dest, message, mailer, emailFrom }) {
    const to = await db
      .selectFrom("destination_recipients as r")
      .innerJoin("users as u", "u.id", "r.user_id")
      .innerJoin("memberships as m", (j) =>
        j.onRef("m.user_id", "=", "r.user_id").on("m.project_id", "=", dest.project_id),
      )
      .select(["u.email"])
      .where("r.destination_id", "=", dest.id)
      .where("r.verify_time", "is not", null)
      .execute();
    if (to.length === 0)
      return skipped("NO_VERIFIED_RECIPIENT", "no recipient is both verified and a project member");
    const mail = renderIncidentEmail(message);
    try {
      for (const r of to) await mailer.sendMail({ from: emailFrom, to: r.email, ...mail });
    } catch (err) {
      return {
        status: "FAILED",
        code: 0,
        detail: `SMTP: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    const by = mailer.acceptedBy ?? "the SMTP server";
    return { status: "SENT", code: 0, detail: `accepted by ${by} for ${to.length} recipient(s)` };
  },
};
