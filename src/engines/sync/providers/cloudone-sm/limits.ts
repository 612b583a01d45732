/**
 * `cloudone-sm` rate limits. Published (AWS Secrets Manager quotas): 50 TPS per write operation
 * per region; 10,000 TPS for GetSecretValue + DescribeSecret. Lanyard's caps per access key (or
 * role) and region: 10 in flight, 20 writes/s, 100 reads/s. A throttled call answers 400 with
 * ThrottlingException (or a sibling code), in the x-amzn-errortype header or the body's
 * `__type`, and states no wait.
 */
import { str } from "../../destinations/types";
import { bodyText } from "../../limits/throttle";
import type { GatedRequest, ProviderLimits } from "../../limits/types";

const awsOp = (r: GatedRequest) => (r.headers.get("x-amz-target") ?? "").replace(/^secretsmanager\./, "");
const awsRead = (r: GatedRequest) => /^(Get|Describe|List|BatchGet)/.test(awsOp(r));

const AWS_THROTTLING = new Set(["ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded"]);

export const limits: ProviderLimits = {
  concurrency: 10,
  windows: [
    { id: "writes", budget: 20, windowMs: 1000, cost: (r) => (awsRead(r) ? 0 : 1) },
    { id: "reads", budget: 100, windowMs: 1000, cost: (r) => (awsRead(r) ? 1 : 0) },
  ],
  throttleMs: 2000,
  scope: (c) => [str(c, "access_key_id"), str(c, "role_arn"), str(c, "region") || "us-east-1"],
  async throttleSignal(res) {
    if (res.status !== 400) return {};
    const header = (res.headers.get("x-amzn-errortype") ?? "").split(":")[0] ?? "";
    let code = header.slice(header.indexOf("#") + 1);
    if (!AWS_THROTTLING.has(code)) {
      const m = /"__type"\s*:\s*"([^"]*)"/.exec(await bodyText(res));
      code = (m?.[1] ?? "").slice((m?.[1] ?? "").indexOf("#") + 1).split(":")[0] ?? "";
    }
    return { throttled: AWS_THROTTLING.has(code) };
  },
};
