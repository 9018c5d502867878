//! Annotation keys of the Mthreads vendor.
