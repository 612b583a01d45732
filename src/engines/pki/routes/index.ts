/** The PKI engine's route table, in match order (specific paths before general ones). */
import type { RouteDef } from "../../../core/route";
import { acmeRoutes } from "../acme/routes";
import { certMetadataRoutes } from "./cert-metadata";
import { certRoutes } from "./certs";
import { crlRoutes } from "./crl";
import { revokeRoutes } from "./revoke";
import { externalPolicyRoutes } from "./external-policy";
import { generateRoutes } from "./generate";
import { inventoryRoutes } from "./inventory";
import { issueRoutes } from "./issue";
import { notificationRoutes } from "./notifications";
import { issuerRoutes } from "./issuers";
import { keyRoutes } from "./keys";
import { ocspRoutes } from "./ocsp";
import { roleRoutes } from "./roles";
import { signPrivilegedRoutes } from "./sign-privileged";
import { tidyRoutes } from "./tidy";

export const pkiRoutes: RouteDef[] = [...acmeRoutes, ...externalPolicyRoutes, ...issueRoutes, ...generateRoutes, ...signPrivilegedRoutes, ...certMetadataRoutes, ...issuerRoutes, ...keyRoutes, ...roleRoutes, ...revokeRoutes, ...inventoryRoutes, ...notificationRoutes, ...crlRoutes, ...certRoutes, ...tidyRoutes, ...ocspRoutes];
