export { createSvcClients, createSvcTransport, type SvcClientOptions, type SvcClients } from "./client.ts";
