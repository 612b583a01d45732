import { ConnectorError, type Connector } from "../types";

const missing = (): never => {
  throw new ConnectorError("client", "NotImplemented", "cloudtwo-kv: connector not implemented yet");
};

export const cloudtwoConnector: Connector = { put: async () => missing(), remove: async () => missing() };
