import { ConnectorError, type Connector } from "../types";

const missing = (): never => {
  throw new ConnectorError("client", "NotImplemented", "cloudthree-sm: connector not implemented yet");
};

export const cloudthreeConnector: Connector = { put: async () => missing(), remove: async () => missing() };
