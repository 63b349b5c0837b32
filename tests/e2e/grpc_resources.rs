//! gRPC end to end: volumes, networks, clusters and the catalogue.
