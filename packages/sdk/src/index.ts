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
