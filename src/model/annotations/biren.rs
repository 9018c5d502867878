//! Annotation keys of the Biren vendor.
