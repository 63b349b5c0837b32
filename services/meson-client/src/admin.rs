//! Quotas, and the operators' routes (the admin role): any tenant's
//! quotas, AtomOS targets, the audit log.

use super::*;

impl Client {
    /// A tenant's quotas and usage.
    pub async fn tenant_quota(&self, tenant: &str) -> Result<wire::admin::Quota> {
        let r: wire::admin::QuotaResponse = self.get(&tenant_quota_path(tenant)).await?;
        Ok(r.quota)
    }

    /// Every plan: `default` (the deployment's defaults) first, then by name.
    pub async fn plan_list(&self) -> Result<Vec<wire::admin::Plan>> {
        let r: wire::admin::PlanList = self.get("/v1/plans").await?;
        Ok(r.plans)
    }

    pub async fn plan_get(&self, name: &str) -> Result<wire::admin::Plan> {
        let r: wire::admin::PlanResponse = self
            .get(&format!("/v1/plans/{}", path_segment(name)))
            .await?;
        Ok(r.plan)
    }

    /// `PUT /v1/admin/plans/{name}` (operators): creates or replaces the
    /// whole plan; its tenants' quotas follow at once.
    pub async fn plan_put(
        &self,
        name: &str,
        req: &wire::admin::PlanPutRequest,
    ) -> Result<wire::admin::Plan> {
        let r: wire::admin::PlanResponse = self
            .call(
                Method::PUT,
                &format!("/v1/admin/plans/{}", path_segment(name)),
                Some(req),
            )
            .await?;
        Ok(r.plan)
    }

    /// `DELETE /v1/admin/plans/{name}` (operators): refused (`conflict`)
    /// while a tenant is on it.
    pub async fn plan_delete(&self, name: &str) -> Result<()> {
        let res = self
            .send(
                Method::DELETE,
                &format!("/v1/admin/plans/{}", path_segment(name)),
                None::<&()>,
                false,
            )
            .await?;
        drop(res);
        Ok(())
    }

    /// Sets (or, with `Some(None)`, returns to the default) a tenant's quotas.
    pub async fn tenant_quota_update(
        &self,
        tenant: &str,
        req: &wire::admin::QuotaUpdateRequest,
    ) -> Result<wire::admin::Quota> {
        let r: wire::admin::QuotaResponse = self
            .call(Method::PATCH, &tenant_quota_path(tenant), Some(req))
            .await?;
        Ok(r.quota)
    }

    /// The AtomOS targets meson places on.
    pub async fn target_list(&self) -> Result<Vec<wire::admin::Target>> {
        let r: wire::admin::TargetList = self.get("/v1/targets").await?;
        Ok(r.targets)
    }

    pub async fn target_get(&self, id: Uuid) -> Result<wire::admin::Target> {
        let r: wire::admin::TargetResponse = self.get(&format!("/v1/targets/{id}")).await?;
        Ok(r.target)
    }

    /// Registers an AtomOS target.
    pub async fn target_create(
        &self,
        req: &wire::admin::TargetCreateRequest,
    ) -> Result<wire::admin::TargetResponse> {
        self.call(Method::POST, "/v1/targets", Some(req)).await
    }

    /// Moves a target (host, ports) or turns it on or off.
    pub async fn target_update(
        &self,
        id: Uuid,
        req: &wire::admin::TargetUpdateRequest,
    ) -> Result<wire::admin::TargetResponse> {
        self.call(Method::PATCH, &format!("/v1/targets/{id}"), Some(req))
            .await
    }

    /// Drains a target: no new VMs, and its VMs start migrating off it.
    pub async fn target_drain(&self, id: Uuid) -> Result<wire::admin::TargetDrainResponse> {
        self.call(
            Method::POST,
            &format!("/v1/targets/{id}/actions/drain"),
            None::<&()>,
        )
        .await
    }

    /// Undrains a target: it takes new VMs again.
    pub async fn target_undrain(&self, id: Uuid) -> Result<wire::admin::TargetResponse> {
        self.call(
            Method::POST,
            &format!("/v1/targets/{id}/actions/undrain"),
            None::<&()>,
        )
        .await
    }

    /// VMs hosts hold that meson has no record of, waiting for a decision.
    pub async fn orphan_list(&self) -> Result<Vec<wire::admin::Orphan>> {
        let r: wire::admin::OrphanList = self.get("/v1/admin/orphans").await?;
        Ok(r.orphans)
    }

    pub async fn orphan_get(&self, id: Uuid) -> Result<wire::admin::Orphan> {
        let r: wire::admin::OrphanResponse = self.get(&format!("/v1/admin/orphans/{id}")).await?;
        Ok(r.orphan)
    }

    /// Decides to adopt an orphan into a tenant (carried out by meson's
    /// next reconciler pass).
    pub async fn orphan_adopt(
        &self,
        id: Uuid,
        req: &wire::admin::OrphanAdoptRequest,
    ) -> Result<wire::admin::Orphan> {
        let r: wire::admin::OrphanResponse = self
            .call(
                Method::POST,
                &format!("/v1/admin/orphans/{id}/actions/adopt"),
                Some(req),
            )
            .await?;
        Ok(r.orphan)
    }

    /// Decides to delete an orphan from its host (carried out by meson's
    /// next reconciler pass).
    pub async fn orphan_delete(&self, id: Uuid) -> Result<wire::admin::Orphan> {
        let r: wire::admin::OrphanResponse = self
            .call(
                Method::POST,
                &format!("/v1/admin/orphans/{id}/actions/delete"),
                None::<&()>,
            )
            .await?;
        Ok(r.orphan)
    }

    /// A page of the audit log (a tenant's own for an owner, anyone's for an
    /// operator), newest first.
    pub async fn audit_list(
        &self,
        page: Page,
        filter: &wire::admin::AuditListQuery,
    ) -> Result<wire::admin::AuditList> {
        let mut q: Vec<(&str, String)> = Vec::new();
        for (key, v) in [
            ("tenant", &filter.tenant),
            ("subject", &filter.subject),
            ("operation", &filter.operation),
            ("resource_id", &filter.resource_id),
        ] {
            if let Some(v) = v {
                q.push((key, v.clone()));
            }
        }
        for (key, v) in [("since", &filter.since), ("until", &filter.until)] {
            if let Some(v) = v {
                q.push((key, v.to_rfc3339()));
            }
        }
        self.get(&list_path("/v1/audit", &page, &q)).await
    }
}
