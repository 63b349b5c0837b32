//! Port forwards: public ports of a network's VMs' hosts relayed to the VMs.

use super::*;
use meson_types::port_forward::{
    PortForward, PortForwardCreateRequest, PortForwardCreateResponse, PortForwardList,
    PortForwardResponse,
};

impl Client {
    /// `POST /v1/networks/{id}/port-forwards`: the forward (`creating`, its
    /// public port held) and its action.
    pub async fn port_forward_create(
        &self,
        network: Uuid,
        req: &PortForwardCreateRequest,
    ) -> Result<PortForwardCreateResponse> {
        self.call(
            Method::POST,
            &format!("/v1/networks/{network}/port-forwards"),
            Some(req),
        )
        .await
    }

    /// A network's forwards, oldest first.
    pub async fn port_forward_list(&self, network: Uuid) -> Result<Vec<PortForward>> {
        let r: PortForwardList = self
            .get(&format!("/v1/networks/{network}/port-forwards"))
            .await?;
        Ok(r.port_forwards)
    }

    pub async fn port_forward_get(&self, network: Uuid, id: Uuid) -> Result<PortForward> {
        let r: PortForwardResponse = self
            .get(&format!("/v1/networks/{network}/port-forwards/{id}"))
            .await?;
        Ok(r.port_forward)
    }

    /// Starts removing a forward.
    pub async fn port_forward_delete(&self, network: Uuid, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self
            .call(
                Method::DELETE,
                &format!("/v1/networks/{network}/port-forwards/{id}"),
                None::<&()>,
            )
            .await?;
        Ok(r.action)
    }
}
