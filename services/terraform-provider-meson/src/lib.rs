//! `terraform-provider-meson`: meson's Terraform provider.
//!
//! Terraform runs it as a go-plugin: it checks the magic cookie, listens on
//! a loopback port, prints the handshake line
//! (`1|6|tcp|127.0.0.1:PORT|grpc|<server certificate>`) and serves the
//! plugin protocol, version 6, over gRPC with mutual TLS (AutoMTLS), beside
//! go-plugin's health check and controller.
//!
//! Why the protocol is implemented here, directly on tonic, rather than on
//! the `tf-provider` crate: that crate pins tonic 0.12 and prost 0.13 while
//! this workspace serves gRPC with tonic 0.14 and prost 0.14, so it would
//! bring a second gRPC stack into the tree; and it compiles its .proto with
//! `protoc` at build time, which meson's builds do not install (meson
//! compiles .proto files with protox, in pure Rust). The protocol subset
//! needed is small (`proto/tfplugin6.proto`: the messages this provider
//! uses, by the protocol's field numbers), and the provider logic stays on
//! meson's own typed SDK, `meson-client`.
//!
//! RPCs not declared here answer UNIMPLEMENTED, which is what Terraform
//! expects of a provider that declares no such feature: moving state
//! between resource types, ephemeral and list resources, resource
//! identities, actions and state stores are only called for types a schema
//! declares; go-plugin's stdio stream (`plugin.GRPCStdio`) is read as "no
//! stdio" (the provider logs to stderr, which Terraform collects). Provider
//! functions: `GetFunctions` answers an empty list.
//!
//! - [`value`], Terraform's values (MessagePack with unknowns) and types.
//! - [`schema`], schemas, and the generic plan, apply and refresh rules.
//! - [`resources`], each resource and data source over the SDK.
//! - [`server`], the protocol's service.
//! - [`tls`], AutoMTLS.
//! - [`diag`], meson's errors as diagnostics.

pub mod diag;
pub mod docs;
pub mod resources;
pub mod schema;
pub mod server;
pub mod tls;
pub mod value;

/// The plugin protocol's messages and service.
pub mod proto {
    tonic::include_proto!("tfplugin6");
}

/// go-plugin's controller.
pub mod plugin {
    tonic::include_proto!("plugin");
}

use base64::Engine;
use std::io::Write;
use std::sync::Arc;
use tokio::sync::Notify;

/// go-plugin's handshake cookie for Terraform providers.
pub const COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
pub const COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// go-plugin's controller: the host asks the plugin to exit.
struct Controller {
    shutdown: Arc<Notify>,
}

#[tonic::async_trait]
impl plugin::grpc_controller_server::GrpcController for Controller {
    async fn shutdown(
        &self,
        _: tonic::Request<plugin::Empty>,
    ) -> Result<tonic::Response<plugin::Empty>, tonic::Status> {
        self.shutdown.notify_one();
        Ok(tonic::Response::new(plugin::Empty {}))
    }
}

/// Serves the provider until Terraform asks it to exit; the handshake line
/// goes to stdout once it listens.
pub async fn serve() -> anyhow::Result<()> {
    let client_cert = std::env::var("PLUGIN_CLIENT_CERT").map_err(|_| {
        anyhow::anyhow!("no PLUGIN_CLIENT_CERT: Terraform runs its providers with AutoMTLS")
    })?;
    let tls = tls::setup(&client_cert).map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;

    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("plugin", tonic_health::ServingStatus::Serving)
        .await;
    let shutdown = Arc::new(Notify::new());

    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(s) => {
                        let _ = tx.send(Ok::<_, std::io::Error>(s)).await;
                    }
                    Err(e) => tracing::warn!(error = %e, "TLS handshake refused"),
                }
            });
        }
    });

    let server = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(plugin::grpc_controller_server::GrpcControllerServer::new(
            Controller {
                shutdown: shutdown.clone(),
            },
        ))
        .add_service(
            proto::provider_server::ProviderServer::new(server::MesonProvider::default())
                .max_decoding_message_size(256 << 20)
                .max_encoding_message_size(256 << 20),
        )
        .serve_with_incoming_shutdown(tokio_stream::wrappers::ReceiverStream::new(rx), {
            let shutdown = shutdown.clone();
            async move { shutdown.notified().await }
        });

    let cert = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&tls.cert_der);
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "1|6|tcp|{addr}|grpc|{cert}")?;
        out.flush()?;
    }
    tracing::info!(%addr, "serving");
    server.await?;
    Ok(())
}
