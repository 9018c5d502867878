//! Annotation keys of the MetaxGpu vendor.
