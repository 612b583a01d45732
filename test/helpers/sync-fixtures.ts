/**
 * Test-only keys for secrets-sync tests, generated once with OpenSSL and pasted here:
 *   openssl genrsa -traditional -out pkcs1.pem 2048        (PKCS#1, as the repository host issues)
 *   openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out pkcs8.pem
 *   openssl genrsa -traditional -out small.pem 1024
 *   openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt
 * The fingerprints were computed by OpenSSL, the way the host displays them:
 *   openssl rsa -in key.pem -pubout -outform DER | openssl sha256 -binary | openssl base64
 * These keys protect nothing; never use them outside tests.
 */

export const RSA_PKCS1_PEM = `-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA6iqMtdN6m9iJoX9eRVEAtctw8/xatpav7zbpUzhb9K4QesTM
IrISGyqFvuKTLp8k4ZVudXqryvBnLXGM4VNhd+MiQmmnTYaeJk1mZ4RwpVrjKEBD
zLQkcKGEqptSb8Y0pD7Xq8aJdHIuafkBDSgzMgRkOe7AIFmR21O5/uYDx5abNtFc
dghwDioj4C+3cSg88RXqoiHlmbjqpsK0Y6dirJKU4Vlvnz0cE9h71W+KDkHwaf+8
F/9teVyStff1MVdQt0yRsH5ULQ8ytQupv2e7ye0xMZ8iB8XPVCUPxiazgWTHdTdA
TxxuIpzYND19v28P+mwf70zijm8NL/T/jvUhZQIDAQABAoIBACeGYxXVyl4/4ItH
6muczpfg7QHh2JX1PWENTbjkTHEyaEmwqhw5HmFDfivIJru51QnWpTxjJlgs192N
yw/FeTA5QHEhUEH/tPYWHnDeo/zlKG6E2mzVA0mXmcMKUJHZTM1kZhbyfgUPuNHe
W9USsgGBSEGXEQrk03/H1B84R+8KJBUN64izshkyA3oKQV6K1zW/OzSbVAqVauyU
v3GIZRpRy0YMusASnSCYokyd/n+evWJ3ZfwwRELp0fsY58NjxlYnB5GhFbaE12O7
4E5dl9HbgH3SFZr4fP+scU41bZOJKmhX7c09V9A+C8fcuKJXZP5JVn5lHQsszvq+
XRI39EkCgYEA/p7YfKNAvoKm0M2VVEUybjHbeXqsrEsR7GkEt67ywhwVQWbVSaSc
I/iaPgguGKi5Jyp8eEg5cb/64uK7+JJSCbp15ywXdF/9K/fy8PeNZv3pb7IbdFWP
ua3bxVFWgg8yndd0ur4xDssVrHxJJtm1pP6x1BkpI/VuKVpeM56r2ucCgYEA629V
kZaJDU6B38bLjibRV1G1ccJz3dnXsiY8treUNpo8HttMFEedYKKhjCHzGoeGWyfM
A4gqUV6dmsprdHHzO46adM/UoVN3zuf5G8cdWNYe0wJk0emcmwm370K3Y7wwFMDV
9TlGtryd5V4+SmwWdx4EVWCV/OPZW//csM1pA9MCgYEA6kQoFvT1etMmvHKKdFB+
R9jjf++Ys6UWRpeRWZdDj8ja3aPJlco4RvhSocRQ9Ss3v4tdniWFhN0H7nyCSgAG
LyE5nYp5wf8XJr8o7QA3P41anAQZMn4OkN4fmHpvx5ZIEeXMZozbAitkM6DehTpF
4BrebrD/ozALPU0B4yiYIf0CgYB7I+JXoarRYOyhBLNXCIqZ50zF0XUU5mng7gr3
bpGA9a7YXM8wFD0GXEmup9slVxk4+FnGxyOLJ7e7TIBjiW41CmNTEZkfQC7782zh
0IVS/7tjlm7xNAULOkwQQo71BWsIj8vY1TpdPc5AN8jQ2DPv3a1akoggm3QGoI7n
kqiIrQKBgAwJFPUno0DXftOaSG4f+UYRBt5j20bp4Qipl1VkS/HAHaOfU+okJTUa
g2agjIMXjWRwHRMl9FO972z4O7ExXND7++UoVj04CS1rC/c+Tf6iaeD6WVZT1HTq
2O9yI0BGwDHLcVHtgGu2iZAlUOk6yvOZqiytCaFWxNesSFss3TQN
-----END RSA PRIVATE KEY-----
`;

export const RSA_PKCS1_FINGERPRINT = "SHA256:9t9j3T/B6vWjkfuiugc9GqCkw403Jk47W53rW2F93lM=";

export const RSA_PKCS8_PEM = `-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDtONHfCI+tVWdr
lBZXhqY45xynRgO9VSgK8cLQyO2C501KHUrfQ6EekareL5y4DPahrQUPwaK9E324
HeNimbARMfGcAkD4DW+oGP7VEZn+E+qNUK9E841qYDc/gbOcM1kjrYxNPmWkJSGk
Y+7WHQv0x7sH3Zh8/7+G02tx1/e9nYcMPiBfXuIf2Bm6qKJmbbDMlIsQcXJrVwOT
SyVzI+rHeRuvHPW3D1z1oheN9vQVMAsI+HTE5WVW+q7h7n/l7Sv1qq0I/X7uY0U2
G479j6KSS5w3JWh0oNG9QhmZtsQsXRcK7Fg1URxDJxnReUK9hHUYwBZzxTHTUyxI
oMfjW8l7AgMBAAECggEAC9jfmlzqGAUA4j2GFB70ZDkelDgJ7cW39zv1t8mhGv2E
PaRS3e2ZuVYbC3ejQwnas15Zt1y7TOgRSkWr2nvEcEdnQpxWNE0ve1ysNWXoo+jI
uQADkNT9BggCGljW6IEj/YUoUZ9BIj58fKJFBkpzE2l6LL1jZTK8lPYwEoJvq/d+
beTnfyIE1tlPTE8a5wyk25WaUUSq5jYslOnZMT6Edy5eGVK+MGUuepfZJoqyUvEy
KtMLQeOW1RYohI7rX/NCsejOxF6X3a+sx9KvbECmGgxQAsa15r7o8HToodnd1Vk1
VxFmH4I9E7nPwUYtbvHZpQKGFiZMd//mnNCKWrc98QKBgQD6kLMNEulab4K6JB70
8FLGV4M37ma9aYw5x67+fgOYh6eGx/m6pdEzWUZ4w97tRz1xX6D+pX/W9oKJX099
TwanQrOBZJ5EMzkb5l1s3v2lWAV7FVqIfRef5robyTkSKX3BPO8KX/WFfB4sUBNZ
Rg4bZLhjZuoJdcs62xgJhlGtkwKBgQDyXgekds/LCvlNULzkb1X52RHNPN74rEvw
RUerwrMnpTMEOl8amNcBgPTxbtP9Slkh6WI/sJO5p82Cw/mq13T6FmqkZK0dJMqz
otl9UuQWg9evKi7wHzS/ESBtSmPoqsxaZdOZobUFnKaSsLlQE3r/S/1yFBmaiXWX
vJkn2zuleQKBgQDmZcOek/MrCzpjuu8UPx997d5kwbyLEtC0GJ8at/jKeoJa9ur0
66Av3TlltoX4HPeslkhNnxSsL0Pc2V0YVmBB0J2Kr2CwSYGL3AmwIGOPdB6mDP6Q
XqYojFo5TpBB2REfbM5I9e+nbHe6O29vOXGjUrwR+wHc7QmQ9wFlULMuLQKBgC3D
0Z+di7kkVlTiFPjxiQOHmJPvlY7RQfmZq2Hkft3SlOKMfx7Pk3HGPvpD2iWu30vG
/PVXy104MVcq2D8JNh5vEy39kK67HsdyzaybdVRHCvgZeAmBav1VJ5FbhagOcE31
glI1NbBclxuF4UgclZIVcEMVRoxmvlyrkSP0grvJAoGAMrq1vOS3GB/FTx75i/4s
nr6Kr3BQlp/gBvNKS581fcXueZnBnWr9/QJYvr0TnBgNRMH41zDhK8R+xTZ+tGd6
y9eq2X/NYq2RLi/35S4d5VpvVheMj0rsmLkPaIYDXE6SJXxUHzZaze72YeyEPHvn
p4nWV5l3HC6j84KPdlT/unE=
-----END PRIVATE KEY-----
`;

export const RSA_PKCS8_FINGERPRINT = "SHA256:BivTbxE8AmXENw2EC74WZMOjV/F8aUmKUEEyoA6MyMA=";

export const RSA_1024_PKCS1_PEM = `-----BEGIN RSA PRIVATE KEY-----
MIICXgIBAAKBgQDOELSguFvzB01M1KVGoa06YrlEdQNd7RqDvJdjhVCya05uLQbH
oo3bMKvx2bmRP4XLppsHqFCJTO3d1Qcnc1MdnR2/BrJfQ5XzrD31vkB11abYuTCp
yIOiVC6hP28F3v7qH/8UyhvV5y5hkVZGNKo6XqnIU8GOBTp7rqsc3R6ZFwIDAQAB
AoGBALmb1Icb6D6sqhT1SPWo9VaszAH8gA7fXc2hVp9e2sQK4bdduUiig7IWUhpj
KcHJ/OLl66hnFDvH3k2871e6ifZ55TdeLW2WrZMfKJcdEe5YOqpsroaPVTiKNQ0m
A2MwzmzzWAQOuamOR944bwEmLH3vOEOVHxfE/m38rlGwpGHBAkEA5sEIVsYDfzxN
sLH+/ttQQ5Za+mGIPRMTkJ3Ey+F2ms0w00vGiDsFBbIinU7BPVMovERKH5TS8W/c
e9VhmrB0YQJBAOScMFa2vHLzFPOL+Kp6ns1s2N76n298ebmHNd6emhyUgZ8lSRok
Zd5X/kQBgrKCbl4Ld9uHkV7v4gbWcyPogHcCQQDAU30+zbWWc82RCxoskuCYJJZZ
f7cMqHyzGTwwbg/rwEAErHChlQd/ktRU5pIbKdeW6xgYsHMMtp4/PD8org+hAkAt
tAP98f5uxKYVopAOFQGWdAJPYa9qLGpxatScMv0AZbgcRun8bfZnoxPUKLEmWukR
qB1IKCwp3K9FSq4uKZc1AkEAxIUDWXbSZUyADcVwBAfV3wady33Uo+0ot8iBIB00
bUd8dhedWBSMKKZLbdPbxVxY8PcdroXEx+X8IzrXKlOdRw==
-----END RSA PRIVATE KEY-----
`;

export const EC_PKCS8_PEM = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgwExIJI3zH15vwHaJ
pjQ4xytvvJwMHTFnBAwOkUvU9U+hRANCAAQ5QQ3RO8hR4BfTQGV2ocQGMoUoeLKi
Jf09kB8HG4eSOhqKlEgsIumOjwuQI5XaPTmY8as8mIsW4RfVoIY8Yijz
-----END PRIVATE KEY-----
`;

/** A service-account key file of the shape the secret manager issues (test key, fake account). */
export function serviceAccountJson(overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    type: "service_account",
    project_id: "lanyard-test-project",
    private_key_id: "0123456789abcdef0123456789abcdef01234567",
    private_key: RSA_PKCS8_PEM,
    client_email: "sync@lanyard-test-project.iam.gserviceaccount.com",
    client_id: "123456789012345678901",
    auth_uri: "https://accounts.google.com/o/oauth2/auth",
    token_uri: "https://oauth2.googleapis.com/token",
    ...overrides,
  });
}
