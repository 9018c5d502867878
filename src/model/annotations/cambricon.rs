//! Annotation keys of the Cambricon vendor.
