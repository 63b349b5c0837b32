//! Quotes on the wire: the price of a VM payload per candidate placement.

use crate::{Price, Warning};
use serde::{Deserialize, Serialize};

/// What one AtomOS host would charge for the VM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Quote {
    pub provider: String,
    pub region: String,
    pub continent: String,
    /// The AtomOS target (host) the VM would run on.
    pub host: String,
    pub price: Price,
}

/// `POST /v1/quotes`: every host that can fit the VM, cheapest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuoteResponse {
    /// Sorted by hourly price, then host name.
    pub quotes: Vec<Quote>,
    /// The first of `quotes`: where `POST /v1/vms` would place the VM now.
    pub cheapest: Quote,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}
