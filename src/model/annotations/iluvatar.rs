//! Annotation keys of the Iluvatar vendor.
