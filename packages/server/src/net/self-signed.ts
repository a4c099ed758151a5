import { execFileSync } from "node:child_process";

/**
 * Writes a self-signed P-256 certificate and its key (PEM) with openssl, for loopback HTTPS peers: the
 * demo's receivers and the tests' receivers. `altNames` in openssl's form, e.g. "IP:127.0.0.1".
 */
export function writeSelfSignedCertificate(
  keyPath: string,
  certPath: string,
  opts: { subject: string; altNames: string; days: number },
): void {
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-days",
      String(opts.days),
      "-subj",
      `/CN=${opts.subject}`,
      "-addext",
      `subjectAltName=${opts.altNames}`,
      "-keyout",
      keyPath,
      "-out",
      certPath,
    ],
    { stdio: "ignore" },
  );
}
