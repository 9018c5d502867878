//! Annotation keys of the Hygon vendor.
