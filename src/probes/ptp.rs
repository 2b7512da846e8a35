//! Placeholder: being written.

use serde::{Deserialize, Serialize};

/// One result entry (placeholder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PtpEntry {}
