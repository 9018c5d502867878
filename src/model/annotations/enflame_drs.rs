//! Annotation keys of the EnflameDrs vendor.
