import { ConnectorError, type Connector } from "../types";

const missing = (): never => {
  throw new ConnectorError("client", "NotImplemented", "repohost: connector not implemented yet");
};

export const repohostConnector: Connector = { put: async () => missing(), remove: async () => missing() };
