//! API tokens issued by meson: bearer secrets for a tenant's automation,
//! each with a role no higher than its creator's (owners only).

use super::*;
use meson_types::token::{
    ApiToken, TokenCreateRequest, TokenCreateResponse, TokenList, TokenResponse,
};

impl Client {
    /// `POST /v1/tokens`: the token and its secret, which meson shows this
    /// once (it keeps only its hash). The secret authenticates a client
    /// (`Client::new(url, &created.secret)`) at the token's role until it
    /// expires or is revoked.
    pub async fn token_create(&self, req: &TokenCreateRequest) -> Result<TokenCreateResponse> {
        self.call(Method::POST, "/v1/tokens", Some(req)).await
    }

    /// The tenant's live tokens, newest first (never their secrets); the
    /// revoked ones too with `revoked`.
    pub async fn token_list(&self, revoked: bool) -> Result<Vec<ApiToken>> {
        let path = if revoked {
            "/v1/tokens?revoked=true"
        } else {
            "/v1/tokens"
        };
        let r: TokenList = self.get(path).await?;
        Ok(r.tokens)
    }

    pub async fn token_get(&self, id: Uuid) -> Result<ApiToken> {
        let r: TokenResponse = self.get(&format!("/v1/tokens/{id}")).await?;
        Ok(r.token)
    }

    /// `DELETE /v1/tokens/{id}`: the token, revoked; meson refuses its
    /// secret from now on. One revoked already is a `conflict`.
    pub async fn token_revoke(&self, id: Uuid) -> Result<ApiToken> {
        let r: TokenResponse = self
            .call(Method::DELETE, &format!("/v1/tokens/{id}"), None::<&()>)
            .await?;
        Ok(r.token)
    }
}
