//! The organisation a client acts in and its sub-organisations.

use super::*;
use meson_types::organization::{
    Organization, OrganizationCreateRequest, OrganizationList, OrganizationResponse,
    OrganizationUpdateRequest,
};

fn organization_path(id: &str) -> String {
    format!("/v1/organizations/{}", path_segment(id))
}

impl Client {
    /// The organisation the client acts in first, then every one below it.
    pub async fn organization_list(&self) -> Result<Vec<Organization>> {
        let r: OrganizationList = self.get("/v1/organizations").await?;
        Ok(r.organizations)
    }

    pub async fn organization_get(&self, id: &str) -> Result<Organization> {
        let r: OrganizationResponse = self.get(&organization_path(id)).await?;
        Ok(r.organization)
    }

    /// `POST /v1/organizations`: a sub-organisation with quotas carved out
    /// of its parent's.
    pub async fn organization_create(
        &self,
        req: &OrganizationCreateRequest,
    ) -> Result<Organization> {
        let r: OrganizationResponse = self
            .call(Method::POST, "/v1/organizations", Some(req))
            .await?;
        Ok(r.organization)
    }

    /// `PATCH /v1/organizations/{id}`: the quotas named change.
    pub async fn organization_update(
        &self,
        id: &str,
        req: &OrganizationUpdateRequest,
    ) -> Result<Organization> {
        let r: OrganizationResponse = self
            .call(Method::PATCH, &organization_path(id), Some(req))
            .await?;
        Ok(r.organization)
    }

    /// Ends a sub-organisation that holds nothing.
    pub async fn organization_delete(&self, id: &str) -> Result<Organization> {
        let r: OrganizationResponse = self
            .call(Method::DELETE, &organization_path(id), None::<&()>)
            .await?;
        Ok(r.organization)
    }
}
