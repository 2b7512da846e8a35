//! The hwlat tracer: hardware and firmware stalls, a check run alone.
