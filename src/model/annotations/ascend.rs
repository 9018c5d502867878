//! Annotation keys of the Ascend vendor.
