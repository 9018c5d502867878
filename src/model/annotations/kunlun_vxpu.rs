//! Annotation keys of the KunlunVxpu vendor.
