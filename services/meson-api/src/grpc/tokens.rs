//! `meson.v1.TokenService`: API tokens issued by meson. A secret it hands
//! out authenticates gRPC calls as it does REST ones (`crate::gate`).

use super::{Svc, answer, convert, id, note_resource, principal};
use crate::views;
use meson_core::TokenId;
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::token_service_server::TokenService for Svc {
    async fn create_token(
        &self,
        req: Request<pb::CreateTokenRequest>,
    ) -> Result<Response<pb::CreateTokenResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let body = convert::token_create(req.get_ref());
            let c = self.0.app.token_create(&p, &body).await?;
            note_resource(&req, "token", c.token.id);
            Ok(pb::CreateTokenResponse {
                token: Some(convert::token(views::token(&c.token))),
                secret: c.secret,
                warnings: convert::warnings(&c.warnings),
            })
        };
        answer(r.await)
    }

    async fn list_tokens(
        &self,
        req: Request<pb::ListTokensRequest>,
    ) -> Result<Response<pb::ListTokensResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let tokens = self.0.app.token_list(&p, req.get_ref().revoked).await?;
            Ok(pb::ListTokensResponse {
                tokens: tokens
                    .iter()
                    .map(|t| convert::token(views::token(t)))
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn get_token(
        &self,
        req: Request<pb::GetTokenRequest>,
    ) -> Result<Response<pb::ApiToken>, Status> {
        let p = principal(&req)?;
        let r = async {
            let t = self
                .0
                .app
                .token_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::token(views::token(&t)))
        };
        answer(r.await)
    }

    async fn revoke_token(
        &self,
        req: Request<pb::RevokeTokenRequest>,
    ) -> Result<Response<pb::ApiToken>, Status> {
        let p = principal(&req)?;
        let r = async {
            let token: TokenId = id("id", &req.get_ref().id)?;
            note_resource(&req, "token", token);
            let t = self.0.app.token_delete(&p, token).await?;
            Ok(convert::token(views::token(&t)))
        };
        answer(r.await)
    }
}
