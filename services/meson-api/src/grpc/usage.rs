//! `meson.v1.UsageService`: metering (`app::usage`). The usage query is
//! read by `app::usage::UsageQuery::parse`, as REST's is; the CSV exports
//! are REST's only.

use super::{Svc, answer, convert, principal};
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::usage_service_server::UsageService for Svc {
    async fn get_usage(
        &self,
        req: Request<pb::GetUsageRequest>,
    ) -> Result<Response<pb::Usage>, Status> {
        let p = principal(&req)?;
        let r = async {
            let q = convert::usage_query(req.get_ref())?;
            Ok(convert::usage(self.0.app.usage(&p, &q).await?))
        };
        answer(r.await)
    }

    async fn list_statements(
        &self,
        req: Request<pb::ListStatementsRequest>,
    ) -> Result<Response<pb::ListStatementsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let tenant = convert::named_tenant(&req.get_ref().tenant);
            let statements = self.0.app.statement_list(&p, tenant).await?;
            Ok(pb::ListStatementsResponse {
                statements: statements.into_iter().map(convert::statement).collect(),
            })
        };
        answer(r.await)
    }

    async fn get_statement(
        &self,
        req: Request<pb::GetStatementRequest>,
    ) -> Result<Response<pb::Statement>, Status> {
        let p = principal(&req)?;
        let r = async {
            let r = req.get_ref();
            let s = self
                .0
                .app
                .statement_get(&p, &r.id, convert::named_tenant(&r.tenant))
                .await?;
            Ok(convert::statement(s))
        };
        answer(r.await)
    }

    async fn list_prices(
        &self,
        req: Request<pb::ListPricesRequest>,
    ) -> Result<Response<pb::ListPricesResponse>, Status> {
        // Anyone admitted reads the prices; the gate checked the role.
        principal(&req)?;
        let r = async {
            let prices = self.0.app.price_list().await?;
            Ok(pb::ListPricesResponse {
                prices: prices.into_iter().map(convert::price_entry).collect(),
            })
        };
        answer(r.await)
    }

    async fn create_price(
        &self,
        req: Request<pb::CreatePriceRequest>,
    ) -> Result<Response<pb::PriceEntry>, Status> {
        // Operators only: the gate refused anyone else (`price_create`'s
        // rule).
        principal(&req)?;
        let r = async {
            let body = convert::price_create(req.get_ref());
            Ok(convert::price_entry(self.0.app.price_create(&body).await?))
        };
        answer(r.await)
    }
}
