//! Annotation keys of the Enflame GCU vendor (whole devices).

/// Pod: the devices the device plugin still has to hand out.
pub const TO_ALLOCATE: &str = "hami.io/enflame-gcu-devices-to-allocate";
/// Pod: what the scheduler allocated; read back when usage is rebuilt.
pub const ALLOCATED: &str = "hami.io/enflame-gcu-devices-allocated";
