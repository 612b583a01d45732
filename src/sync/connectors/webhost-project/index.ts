import { ConnectorError, type Connector } from "../types";

const missing = (): never => {
  throw new ConnectorError("client", "NotImplemented", "webhost-project: connector not implemented yet");
};

export const webhostConnector: Connector = { put: async () => missing(), remove: async () => missing() };
