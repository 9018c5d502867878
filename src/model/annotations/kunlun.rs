//! Annotation keys of the KunlunXpu vendor.
