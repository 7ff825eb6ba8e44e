// A real OpenID provider for the single sign-on tests: the certified `oidc-provider` package
// (pinned in harness_site/cli/bootstrap.py NPM_TEST_PACKAGES), on 127.0.0.1:$PORT, with one client.
// Accounts are whatever login the development sign-in form is given (any password); their
// claims, groups included, are read from $STATE_FILE at every request, so a test changes
// someone's groups in the provider by rewriting that file. The file may also name a
// `token_endpoint` that discovery then advertises (a test's stand-in in front of /token).
import fs from "node:fs";
import Provider from "oidc-provider";

const { PORT, STATE_FILE, JWKS_FILE, CLIENT_ID, CLIENT_SECRET, REDIRECT_URI } = process.env;
const { BASIC_CLIENT_ID, BASIC_CLIENT_SECRET } = process.env;
const issuer = `http://127.0.0.1:${PORT}`;
const state = () => JSON.parse(fs.readFileSync(STATE_FILE, "utf8"));
const SCOPES = "openid email profile groups";

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_post",
    },
    // The same app registered as a client that authenticates with HTTP Basic.
    {
      client_id: BASIC_CLIENT_ID,
      client_secret: BASIC_CLIENT_SECRET,
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  jwks: JSON.parse(fs.readFileSync(JWKS_FILE, "utf8")),
  cookies: { keys: ["sso-test-provider-only"] },
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["preferred_username", "name"],
    groups: ["groups"],
  },
  scopes: ["openid", "email", "profile", "groups"],
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        const account = state().accounts?.[id] ?? {};
        return {
          sub: id,
          email: account.email ?? `${id}@idp.test`,
          email_verified: true,
          preferred_username: id,
          name: id,
          groups: account.groups ?? [],
        };
      },
    };
  },
  // A first-party client: no consent screen, the sign-in form only.
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope(SCOPES);
    await grant.save();
    return grant;
  },
});

provider.use(async (ctx, next) => {
  await next();
  const override = ctx.path === "/.well-known/openid-configuration" && state().token_endpoint;
  if (override) ctx.body = { ...ctx.body, token_endpoint: override };
});

provider.listen(Number(PORT), "127.0.0.1", () => console.log(`ready ${issuer}`));
