//! Annotation keys of the Amd vendor.
