//! Exports of saved results (placeholder: being written).
