//! `meson.v1.CatalogService`: the catalogue and quotes.

use super::{Svc, answer, convert, principal};
use crate::views;
use meson_core::Error;
use meson_proto::meson::v1 as pb;
use meson_types::quote as wire;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl pb::catalog_service_server::CatalogService for Svc {
    async fn list_flavors(
        &self,
        req: Request<pb::ListFlavorsRequest>,
    ) -> Result<Response<pb::ListFlavorsResponse>, Status> {
        let p = principal(&req)?;
        answer(self.0.app.flavors(&p).map(|flavors| {
            pb::ListFlavorsResponse {
                flavors: flavors
                    .iter()
                    .map(|f| convert::flavor(views::flavor(f)))
                    .collect(),
            }
        }))
    }

    async fn list_providers(
        &self,
        req: Request<pb::ListProvidersRequest>,
    ) -> Result<Response<pb::ListProvidersResponse>, Status> {
        let p = principal(&req)?;
        answer(self.0.app.placement_targets(&p).await.map(|targets| {
            pb::ListProvidersResponse {
                providers: views::providers(targets)
                    .into_iter()
                    .map(convert::provider)
                    .collect(),
            }
        }))
    }

    async fn list_kubernetes_versions(
        &self,
        req: Request<pb::ListKubernetesVersionsRequest>,
    ) -> Result<Response<pb::ListKubernetesVersionsResponse>, Status> {
        let p = principal(&req)?;
        let today = meson_core::kubernetes::today();
        answer(self.0.app.kubernetes_versions(&p).map(|releases| {
            pb::ListKubernetesVersionsResponse {
                kubernetes_versions: releases
                    .iter()
                    .map(|r| convert::kubernetes_version(views::kubernetes_version(r, today)))
                    .collect(),
            }
        }))
    }

    /// `POST /v1/quotes` with a VM payload.
    async fn quote_vm(
        &self,
        req: Request<pb::CreateVmRequest>,
    ) -> Result<Response<pb::VmQuotes>, Status> {
        let p = principal(&req)?;
        let r = async {
            let body = convert::vm_create(req.get_ref());
            let q = self.0.app.vm_quote(&p, &body).await?;
            let quotes: Vec<wire::Quote> = q.offers.iter().map(views::quote).collect();
            let cheapest = quotes
                .first()
                .cloned()
                .ok_or_else(|| Error::internal("a survey returned no offers"))?;
            Ok(convert::vm_quotes(wire::QuoteResponse {
                quotes,
                cheapest,
                warnings: q.warnings.iter().map(views::warning).collect(),
            }))
        };
        answer(r.await)
    }

    /// `POST /v1/quotes` with a KaaS payload.
    async fn quote_cluster(
        &self,
        req: Request<pb::CreateClusterRequest>,
    ) -> Result<Response<pb::ClusterQuotes>, Status> {
        let p = principal(&req)?;
        let r = async {
            let body = convert::cluster_create(req.get_ref());
            let q = self.0.app.kaas_quote(&p, &body).await?;
            let placements: Vec<wire::ClusterQuote> =
                q.offers.iter().map(views::cluster_quote).collect();
            let cheapest = placements
                .first()
                .cloned()
                .ok_or_else(|| Error::internal("a cluster survey returned no offers"))?;
            Ok(convert::cluster_quotes(wire::KaasQuoteResponse {
                placements,
                cheapest,
                warnings: q.warnings.iter().map(views::warning).collect(),
            }))
        };
        answer(r.await)
    }
}
