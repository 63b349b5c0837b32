//! meson's gRPC API (`meson.v1`) and the cluster-autoscaler's `externalgrpc`
//! protocol, generated from the files in `proto/`. Modules nest as the
//! protobuf packages do (prost's generated code refers across them that
//! way); [`externalgrpc`] and [`k8s_core`] name the deep ones shortly.

#![allow(clippy::all, clippy::pedantic, missing_docs, rust_2018_idioms)]

pub mod meson {
    pub mod v1 {
        tonic::include_proto!("meson.v1");
    }
}

pub mod clusterautoscaler {
    pub mod cloudprovider {
        pub mod v1 {
            pub mod externalgrpc {
                tonic::include_proto!("clusterautoscaler.cloudprovider.v1.externalgrpc");
            }
        }
    }
}

pub mod k8s {
    pub mod io {
        pub mod api {
            pub mod core {
                pub mod v1 {
                    tonic::include_proto!("k8s.io.api.core.v1");
                }
            }
        }
    }
}

pub use clusterautoscaler::cloudprovider::v1::externalgrpc;
pub use k8s::io::api::core::v1 as k8s_core;

include!(concat!(env!("OUT_DIR"), "/operations.rs"));

/// The descriptors of `meson.v1`, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/meson.bin"));

/// The descriptors of the autoscaler's protocol, for its server's reflection.
pub const EXTERNALGRPC_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/externalgrpc.bin"));
