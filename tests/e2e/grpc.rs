//! gRPC end to end: a generated tonic client over a real socket.
