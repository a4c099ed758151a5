export {
  type CiExchangeOptions,
  type CiToken,
  exchangeCIToken,
  getCIToken,
  type IdTokenRequest,
  IdTokenUnavailableError,
  requestGitHubIdToken,
  verifyCITrustSetup,
} from "./ci.ts";
export { createSvcClients, createSvcTransport, type SvcClientOptions, type SvcClients } from "./client.ts";
export { SvcError, svcErrorInterceptor } from "./errors.ts";
export {
  AMBIGUOUS_CODES,
  createKeyWithRecovery,
  type IssuedKey,
  isAmbiguous,
  type KeyRecoveryOptions,
  recoverLostKey,
  rotateKeyWithRecovery,
} from "./keys.ts";
export {
  MAX_WEBHOOK_BODY_BYTES,
  readRawBody,
  type VerifiedWebhook,
  VerifyWebhook,
  type VerifyWebhookOptions,
  verifyWebhook,
  type WebhookHeaders,
  WebhookVerificationError,
  type WebhookVerificationReason,
} from "./webhooks.ts";
