//! Annotation keys of the MetaxSgpu vendor.
