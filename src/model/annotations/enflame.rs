//! Annotation keys of the EnflameGcu vendor.
