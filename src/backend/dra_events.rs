//! Telling of a DeviceClass that lets DRA serve a resource name hami-rs serves, the same way for
//! every backend: one warning, one Event on the class, the gauge.

use crate::port::dra::{Change, DraBook};
use crate::port::{Backend, Event, EventType, ObjectKind, PodRef, reasons};

/// Tells what `change` did to `book`: a class that now maps a served name is logged at warn with
/// what that means and gets a Warning Event; one that no longer does is logged at info. The gauge
/// is set from the whole book either way, so calling this again after a relist is harmless.
pub fn tell_dra_change(backend: &impl Backend, book: &DraBook, served: &[String], change: &Change, uid: &str) {
    match change {
        Change::Maps(c) => {
            tracing::warn!(
                device_class = %c.class,
                resource = %c.resource,
                "DeviceClass {} has extendedResourceName {}: {}",
                c.class,
                c.resource,
                crate::port::dra::MEANING
            );
            backend.record_event(Event {
                object: ObjectKind::DeviceClass,
                pod: PodRef { namespace: String::new(), name: c.class.clone(), uid: uid.to_owned() },
                reason: reasons::EXTENDED_RESOURCE_SERVED_BY_DRA,
                kind: EventType::Warning,
                message: format!(
                    "extendedResourceName {} is a resource hami-rs serves: {}",
                    c.resource,
                    crate::port::dra::MEANING
                ),
            });
        }
        Change::Gone(c) => {
            tracing::info!(device_class = %c.class, resource = %c.resource, "DeviceClass no longer maps a resource hami-rs serves");
        }
        Change::Unchanged => return,
    }
    crate::metrics::dra_extended_resource_classes(&book.counts(served));
}
