//! Annotation keys of the Vastai vendor.
