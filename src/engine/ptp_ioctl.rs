//! Placeholder: the PTP ioctl layer, being written.
