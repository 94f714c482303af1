// A real OpenID Connect provider (npm oidc-provider) on loopback, for the sign-in tests: one confidential
// client, accounts whose claims the test names, PKCE required, refresh tokens for `offline_access`, and the
// library's own development login and consent pages. Usage: node oidc-provider.mjs CONFIG_JSON, where
// CONFIG_JSON is {"port", "client_id", "client_secret", "redirect_uri", "accounts_file"}; the accounts file
// ({"login": {claims}}) is read at every lookup, so a test changes a person's groups, or removes them, by
// rewriting it. Prints "listening <issuer>" once ready.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const config = JSON.parse(process.argv[2]);
const issuer = `http://127.0.0.1:${config.port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: config.client_id,
      client_secret: config.client_secret,
      redirect_uris: [config.redirect_uri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  pkce: { required: () => true },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
  scopes: ['openid', 'email', 'groups', 'offline_access'],
  features: { devInteractions: { enabled: true } },
  findAccount: (ctx, id) => {
    const accounts = () => JSON.parse(readFileSync(config.accounts_file, 'utf8'));
    if (!accounts()[id]) return undefined;
    return { accountId: id, claims: () => ({ sub: id, ...accounts()[id] }) };
  },
  cookies: { keys: ['test-only-cookie-key'] },
  ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 600, Grant: 600, RefreshToken: 600 },
});
provider.proxy = false;
provider.on('server_error', (ctx, error) => console.error('server_error', error));

provider.listen(config.port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
