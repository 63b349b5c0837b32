//! The plugin protocol's `Provider` service: schemas, configuration, and
//! each resource's plan, apply, read and import, dispatched to
//! [`crate::resources`].

use crate::diag::{self, Failure};
use crate::proto::{self, provider_server::Provider};
use crate::resources::data::Data;
use crate::resources::{Kind, Notes};
use crate::schema::{Attr, Block, Step};
use crate::value::{Ty, V};
use meson_client::Client;
use std::sync::Mutex;
use tonic::{Request, Response, Status};

/// The provider: its client of meson, once configured.
#[derive(Default)]
pub struct MesonProvider {
    client: Mutex<Option<Client>>,
}

type R<T> = Result<Response<T>, Status>;

fn provider_block() -> Block {
    Block {
        description: "meson: VMs, private networks and Kubernetes clusters. Without `endpoint` \
                      and `token` the provider reads `MESON_URL` and `MESON_TOKEN`, then the \
                      running `mesond dev`'s (found from the working directory, as mesonctl \
                      finds it).",
        attrs: vec![
            Attr::optional(
                "endpoint",
                Ty::Str,
                "meson's REST API, `https://meson.example.com` (else `MESON_URL`, else `mesond dev`'s).",
            ),
            Attr::optional(
                "token",
                Ty::Str,
                "An API token (else `MESON_TOKEN`, else `mesond dev`'s).",
            )
            .sensitive(),
        ],
        blocks: vec![],
    }
}

fn decode(v: Option<&proto::DynamicValue>) -> Result<V, Failure> {
    let Some(v) = v else { return Ok(V::Null) };
    if !v.msgpack.is_empty() {
        return V::from_msgpack(&v.msgpack).map_err(|e| Failure::msg(e, ""));
    }
    if !v.json.is_empty() {
        let j: serde_json::Value = serde_json::from_slice(&v.json)
            .map_err(|e| Failure::msg(format!("bad JSON value: {e}"), ""))?;
        return Ok(V::from_json(&j));
    }
    Ok(V::Null)
}

fn encode(v: &V, ty: &Ty) -> Option<proto::DynamicValue> {
    Some(proto::DynamicValue {
        msgpack: v.to_msgpack(ty),
        json: Vec::new(),
    })
}

fn diags(f: Failure) -> Vec<proto::Diagnostic> {
    vec![f.to_proto()]
}

fn unknown_type(name: &str) -> Failure {
    Failure::msg(
        format!("this provider has no type {name:?}"),
        "upgrade the provider or fix the configuration",
    )
}

impl MesonProvider {
    fn client(&self) -> Result<Client, Failure> {
        self.client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| Failure::msg("the meson provider is not configured", ""))
    }

    fn kind(name: &str) -> Result<Kind, Failure> {
        Kind::parse(name).ok_or_else(|| unknown_type(name))
    }

    fn configure(&self, config: &V) -> Result<(), Failure> {
        for k in ["endpoint", "token"] {
            if config.get(k) == &V::Unknown {
                return Err(Failure::msg(
                    format!("the provider's {k} is not known until apply"),
                    "give it a value known at plan time",
                )
                .at(vec![Step::Attr(k.into())]));
            }
        }
        let c = config.to_json();
        let inputs = meson_client::config::Inputs {
            flag_url: crate::resources::text(&c, "endpoint"),
            flag_token: crate::resources::text(&c, "token"),
            ..meson_client::config::Inputs::from_env(None, None, None)
        };
        let settings = meson_client::config::resolve(&inputs)
            .map_err(|e| Failure::msg("cannot configure the meson provider", e))?;
        tracing::info!(url = %settings.url, url_from = %settings.url_from,
            token_from = %settings.token_from, "configured");
        let client = Client::new(&settings.url, &settings.token)
            .map_err(|e| Failure::msg("cannot configure the meson provider", e.to_string()))?;
        *self.client.lock().unwrap_or_else(|e| e.into_inner()) = Some(client);
        Ok(())
    }

    async fn apply(
        &self,
        kind: Kind,
        prior: &V,
        planned: &V,
        notes: &mut Notes,
    ) -> Result<V, (V, Failure)> {
        let block = kind.block();
        let c = self.client().map_err(|f| (prior.clone(), f))?;
        if planned.is_null() {
            tracing::info!(kind = kind.name(), "deleting");
            kind.delete(&c, &prior.to_json())
                .await
                .map_err(|f| (prior.clone(), f))?;
            return Ok(V::Null);
        }
        let api = if prior.is_null() {
            tracing::info!(kind = kind.name(), "creating");
            kind.create(&c, &planned.to_json(), notes)
                .await
                .map_err(|f| match &f.created {
                    // Created, then failed: kept (tainted) with its id.
                    Some(id) => (block.fill(planned, id), f),
                    None => (V::Null, f),
                })?
        } else {
            tracing::info!(kind = kind.name(), "updating");
            kind.update(&c, &prior.to_json(), &planned.to_json(), notes)
                .await
                .map_err(|f| (prior.clone(), f))?
        };
        Ok(block.fill(planned, &api))
    }
}

#[tonic::async_trait]
impl Provider for MesonProvider {
    async fn get_metadata(
        &self,
        _: Request<proto::get_metadata::Request>,
    ) -> R<proto::get_metadata::Response> {
        use proto::get_metadata::{DataSourceMetadata, ResourceMetadata};
        Ok(Response::new(proto::get_metadata::Response {
            server_capabilities: Some(proto::ServerCapabilities::default()),
            diagnostics: vec![],
            data_sources: Data::ALL
                .iter()
                .map(|d| DataSourceMetadata {
                    type_name: d.name().into(),
                })
                .collect(),
            resources: Kind::ALL
                .iter()
                .map(|k| ResourceMetadata {
                    type_name: k.name().into(),
                })
                .collect(),
        }))
    }

    async fn get_provider_schema(
        &self,
        _: Request<proto::get_provider_schema::Request>,
    ) -> R<proto::get_provider_schema::Response> {
        Ok(Response::new(proto::get_provider_schema::Response {
            provider: Some(provider_block().schema()),
            resource_schemas: Kind::ALL
                .iter()
                .map(|k| (k.name().to_owned(), k.block().schema()))
                .collect(),
            data_source_schemas: Data::ALL
                .iter()
                .map(|d| (d.name().to_owned(), d.block().schema()))
                .collect(),
            diagnostics: vec![],
            server_capabilities: Some(proto::ServerCapabilities::default()),
        }))
    }

    async fn validate_provider_config(
        &self,
        _: Request<proto::validate_provider_config::Request>,
    ) -> R<proto::validate_provider_config::Response> {
        Ok(Response::new(Default::default()))
    }

    async fn validate_resource_config(
        &self,
        req: Request<proto::validate_resource_config::Request>,
    ) -> R<proto::validate_resource_config::Response> {
        let req = req.into_inner();
        let check = || -> Result<(), Failure> {
            let kind = Self::kind(&req.type_name)?;
            // Unknown values read as null: checked at apply.
            let config = decode(req.config.as_ref())?.to_json();
            for op in ["create", "update", "delete"] {
                crate::resources::timeout(&config, op)?;
            }
            if kind == Kind::Vm {
                crate::resources::vm::check_power_state(&config)?;
                crate::resources::vm::check_backups(&config)?;
            }
            Ok(())
        };
        Ok(Response::new(proto::validate_resource_config::Response {
            diagnostics: check().err().map(diags).unwrap_or_default(),
        }))
    }

    async fn validate_data_resource_config(
        &self,
        req: Request<proto::validate_data_resource_config::Request>,
    ) -> R<proto::validate_data_resource_config::Response> {
        let req = req.into_inner();
        let check = || -> Result<(), Failure> {
            let data = Data::parse(&req.type_name).ok_or_else(|| unknown_type(&req.type_name))?;
            // Unknown values read as null: checked when read.
            data.check(&decode(req.config.as_ref())?.to_json())
        };
        let diagnostics = check().err().map(diags).unwrap_or_default();
        Ok(Response::new(
            proto::validate_data_resource_config::Response { diagnostics },
        ))
    }

    async fn upgrade_resource_state(
        &self,
        req: Request<proto::upgrade_resource_state::Request>,
    ) -> R<proto::upgrade_resource_state::Response> {
        let req = req.into_inner();
        let run = || -> Result<proto::DynamicValue, Failure> {
            let kind = Self::kind(&req.type_name)?;
            let raw = req
                .raw_state
                .as_ref()
                .map(|r| r.json.as_slice())
                .unwrap_or_default();
            let j: serde_json::Value = if raw.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::from_slice(raw)
                    .map_err(|e| Failure::msg(format!("unreadable state: {e}"), ""))?
            };
            Ok(encode(&V::from_json(&j), &kind.block().ty()).unwrap_or_default())
        };
        Ok(Response::new(match run() {
            Ok(v) => proto::upgrade_resource_state::Response {
                upgraded_state: Some(v),
                diagnostics: vec![],
            },
            Err(f) => proto::upgrade_resource_state::Response {
                upgraded_state: None,
                diagnostics: diags(f),
            },
        }))
    }

    async fn configure_provider(
        &self,
        req: Request<proto::configure_provider::Request>,
    ) -> R<proto::configure_provider::Response> {
        let req = req.into_inner();
        let r = decode(req.config.as_ref()).and_then(|c| self.configure(&c));
        Ok(Response::new(proto::configure_provider::Response {
            diagnostics: r.err().map(diags).unwrap_or_default(),
        }))
    }

    async fn read_resource(
        &self,
        req: Request<proto::read_resource::Request>,
    ) -> R<proto::read_resource::Response> {
        let req = req.into_inner();
        let run = async {
            let kind = Self::kind(&req.type_name)?;
            let block = kind.block();
            let current = decode(req.current_state.as_ref())?;
            let c = self.client()?;
            let now = match kind.read(&c, &current.to_json()).await? {
                None => {
                    tracing::info!(kind = kind.name(), "gone from meson");
                    V::Null
                }
                Some(api) => block.refresh(&current, &api),
            };
            Ok::<_, Failure>(encode(&now, &block.ty()))
        };
        Ok(Response::new(match run.await {
            Ok(state) => proto::read_resource::Response {
                new_state: state,
                diagnostics: vec![],
                private: req.private,
            },
            Err(f) => proto::read_resource::Response {
                new_state: req.current_state,
                diagnostics: diags(f),
                private: req.private,
            },
        }))
    }

    async fn plan_resource_change(
        &self,
        req: Request<proto::plan_resource_change::Request>,
    ) -> R<proto::plan_resource_change::Response> {
        let req = req.into_inner();
        let run = || -> Result<_, Failure> {
            let kind = Self::kind(&req.type_name)?;
            let block = kind.block();
            let prior = decode(req.prior_state.as_ref())?;
            let proposed = decode(req.proposed_new_state.as_ref())?;
            let config = decode(req.config.as_ref())?;
            let (planned, replace) = block.plan(&prior, &proposed, &config);
            Ok((encode(&planned, &block.ty()), replace))
        };
        Ok(Response::new(match run() {
            Ok((planned, replace)) => proto::plan_resource_change::Response {
                planned_state: planned,
                requires_replace: replace
                    .iter()
                    .map(|p| crate::schema::path_proto(p))
                    .collect(),
                planned_private: req.prior_private,
                diagnostics: vec![],
            },
            Err(f) => proto::plan_resource_change::Response {
                diagnostics: diags(f),
                ..Default::default()
            },
        }))
    }

    async fn apply_resource_change(
        &self,
        req: Request<proto::apply_resource_change::Request>,
    ) -> R<proto::apply_resource_change::Response> {
        let req = req.into_inner();
        let kind = match Self::kind(&req.type_name) {
            Ok(k) => k,
            Err(f) => {
                return Ok(Response::new(proto::apply_resource_change::Response {
                    new_state: req.prior_state,
                    private: vec![],
                    diagnostics: diags(f),
                }));
            }
        };
        let ty = kind.block().ty();
        let decoded = decode(req.prior_state.as_ref())
            .and_then(|p| Ok((p, decode(req.planned_state.as_ref())?)));
        let (prior, planned) = match decoded {
            Ok(v) => v,
            Err(f) => {
                return Ok(Response::new(proto::apply_resource_change::Response {
                    new_state: req.prior_state,
                    private: vec![],
                    diagnostics: diags(f),
                }));
            }
        };
        let mut notes = Notes::new();
        let applied = self.apply(kind, &prior, &planned, &mut notes).await;
        let mut diagnostics: Vec<proto::Diagnostic> = notes
            .iter()
            .map(|w| diag::warning(w, kind.field(&w.field)))
            .collect();
        let state = match applied {
            Ok(state) => state,
            Err((state, f)) => {
                diagnostics.extend(diags(f));
                state
            }
        };
        Ok(Response::new(proto::apply_resource_change::Response {
            new_state: encode(&state, &ty),
            private: req.planned_private,
            diagnostics,
        }))
    }

    async fn import_resource_state(
        &self,
        req: Request<proto::import_resource_state::Request>,
    ) -> R<proto::import_resource_state::Response> {
        let req = req.into_inner();
        let run = || -> Result<_, Failure> {
            let kind = Self::kind(&req.type_name)?;
            let state = V::from_json(&kind.import_state(&req.id)?);
            Ok(proto::import_resource_state::ImportedResource {
                type_name: req.type_name.clone(),
                state: encode(&state, &kind.block().ty()),
                private: vec![],
            })
        };
        Ok(Response::new(match run() {
            Ok(r) => proto::import_resource_state::Response {
                imported_resources: vec![r],
                diagnostics: vec![],
            },
            Err(f) => proto::import_resource_state::Response {
                imported_resources: vec![],
                diagnostics: diags(f),
            },
        }))
    }

    async fn read_data_source(
        &self,
        req: Request<proto::read_data_source::Request>,
    ) -> R<proto::read_data_source::Response> {
        let req = req.into_inner();
        let run = async {
            let data = Data::parse(&req.type_name).ok_or_else(|| unknown_type(&req.type_name))?;
            let config = decode(req.config.as_ref())?;
            let c = self.client()?;
            let v = data.read(&c, &config.to_json()).await?;
            Ok::<_, Failure>(encode(&V::from_json(&v), &data.block().ty()))
        };
        Ok(Response::new(match run.await {
            Ok(state) => proto::read_data_source::Response {
                state,
                diagnostics: vec![],
            },
            Err(f) => proto::read_data_source::Response {
                state: None,
                diagnostics: diags(f),
            },
        }))
    }

    async fn get_functions(
        &self,
        _: Request<proto::get_functions::Request>,
    ) -> R<proto::get_functions::Response> {
        // No provider functions.
        Ok(Response::new(Default::default()))
    }

    async fn stop_provider(
        &self,
        _: Request<proto::stop_provider::Request>,
    ) -> R<proto::stop_provider::Response> {
        Ok(Response::new(Default::default()))
    }
}
