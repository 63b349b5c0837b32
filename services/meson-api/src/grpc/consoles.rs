//! `meson.v1.ConsoleService`. The WebSocket a console's URL names is the
//! REST API's (`console_connect`).

use super::{Svc, answer, convert, id, note_resource, principal};
use crate::views;
use meson_core::{ConsoleId, VmId};
use meson_proto::meson::v1 as pb;
use tonic::{Request, Response, Status};

/// The base of a console's WebSocket URL when the API knows no public URL
/// (mesond always sets one).
const FALLBACK_BASE_URL: &str = "http://127.0.0.1";

#[tonic::async_trait]
impl pb::console_service_server::ConsoleService for Svc {
    async fn request_console(
        &self,
        req: Request<pb::RequestConsoleRequest>,
    ) -> Result<Response<pb::RequestConsoleResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let vm: VmId = id("id", &req.get_ref().id)?;
            note_resource(&req, "vm", vm);
            let base = self
                .0
                .config
                .public_url
                .as_deref()
                .unwrap_or(FALLBACK_BASE_URL);
            let r = self.0.app.vm_request_console(&p, vm, base).await?;
            Ok(pb::RequestConsoleResponse {
                console: Some(convert::console(views::console(&r.console))),
                wss_url: r.url,
                password: r.password,
            })
        };
        answer(r.await)
    }

    async fn list_consoles(
        &self,
        req: Request<pb::ListConsolesRequest>,
    ) -> Result<Response<pb::ListConsolesResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let f = convert::console_filter(req.get_ref())?;
            let consoles = self.0.app.console_list(&p, &f).await?;
            Ok(pb::ListConsolesResponse {
                consoles: consoles
                    .iter()
                    .map(|c| convert::console(views::console(c)))
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn get_console(
        &self,
        req: Request<pb::GetConsoleRequest>,
    ) -> Result<Response<pb::Console>, Status> {
        let p = principal(&req)?;
        let r = async {
            let c = self
                .0
                .app
                .console_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::console(views::console(&c)))
        };
        answer(r.await)
    }

    async fn delete_console(
        &self,
        req: Request<pb::DeleteConsoleRequest>,
    ) -> Result<Response<pb::Console>, Status> {
        let p = principal(&req)?;
        let r = async {
            let console: ConsoleId = id("id", &req.get_ref().id)?;
            note_resource(&req, "console", console);
            let c = self.0.app.console_delete(&p, console).await?;
            Ok(convert::console(views::console(&c)))
        };
        answer(r.await)
    }
}
