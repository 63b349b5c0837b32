//! The cluster-autoscaler's `externalgrpc` CloudProvider service.
