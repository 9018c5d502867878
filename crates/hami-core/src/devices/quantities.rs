//! How vendors read a container's device quantities. A quantity that is given must be usable:
//! one that does not parse, is not a whole number where HAMi reads whole numbers, or lies outside
//! the range HAMi's int32 request fields can hold is an error naming the resource and the value.
//! HAMi drops such a container's request (or falls back to a default) and places the pod as if
//! it needed nothing; hami-rs refuses the pod instead, at admission and at Filter.

use std::fmt::Display;
use std::ops::RangeInclusive;

use crate::model::pod::QuantityText;
use crate::model::quantity::NotI64;
use crate::model::request::{ContainerRequest, Unusable};
use crate::model::{ContainerView, VendorId};

use super::Names;

/// The largest value of HAMi's int32 request fields (count, memory, cores).
pub const I32_MAX: i64 = i32::MAX as i64;

/// Devices one container may ask for: HAMi keeps the count in an int32.
const COUNTS: RangeInclusive<i64> = 0..=I32_MAX;

/// The quantity `name` is given as, limit else request; `None` for an empty name.
pub fn given<'a>(c: &'a ContainerView, name: &str) -> Option<&'a QuantityText> {
    c.quantity(name).filter(|_| !name.is_empty())
}

/// The limit of `name` only, for vendors that ignore requests; `None` for an empty name.
pub fn given_limit<'a>(c: &'a ContainerView, name: &str) -> Option<&'a QuantityText> {
    c.limit(name).filter(|_| !name.is_empty())
}

fn out_of_range(name: &str, value: impl Display, range: &RangeInclusive<i64>) -> Unusable {
    Unusable::OutOfRange { resource: name.to_owned(), value: value.to_string(), min: *range.start(), max: *range.end() }
}

fn unparsable(name: &str, e: impl Display) -> Unusable {
    Unusable::Unparsable { resource: name.to_owned(), detail: e.to_string() }
}

/// A quantity as an exact integer (Go's `AsInt64`) within `range`; `Ok(None)` when not given.
pub fn int_in(q: Option<&QuantityText>, name: &str, range: RangeInclusive<i64>) -> Result<Option<i64>, Unusable> {
    let Some(text) = q else { return Ok(None) };
    let parsed = text.parse().map_err(|e| unparsable(name, e))?;
    match parsed.to_i64() {
        Ok(v) if range.contains(&v) => Ok(Some(v)),
        Ok(v) => Err(out_of_range(name, v, &range)),
        Err(NotI64::OutOfRange) => Err(out_of_range(name, &text.0, &range)),
        Err(NotI64::Fraction) => Err(Unusable::NotInteger { resource: name.to_owned(), value: text.0.to_string() }),
    }
}

/// A quantity rounded up as Go's `Value` rounds, within `range`; `Ok(None)` when not given. For
/// the resources HAMi reads with `Value`, where a fraction is a valid request.
pub fn ceil_in(q: Option<&QuantityText>, name: &str, range: RangeInclusive<i64>) -> Result<Option<i64>, Unusable> {
    let Some(text) = q else { return Ok(None) };
    let v = text.parse().map_err(|e| unparsable(name, e))?.value_ceil();
    if range.contains(&v) { Ok(Some(v)) } else { Err(out_of_range(name, v, &range)) }
}

/// A device count from an already chosen quantity: `Ok(None)` when not given or 0 (no request of
/// this vendor); a count that is not a whole number in int32 range is an error.
pub fn count_of(q: Option<&QuantityText>, name: &str) -> Result<Option<u32>, Unusable> {
    match int_in(q, name, COUNTS)? {
        None | Some(0) => Ok(None),
        // In 1..=I32_MAX: the conversion cannot fail.
        Some(n) => Ok(u32::try_from(n).ok()),
    }
}

/// A device count, limit else request (see [`count_of`]).
pub fn count(c: &ContainerView, name: &str) -> Result<Option<u32>, Unusable> {
    count_of(given(c, name), name)
}

/// Memory in MiB, limit else request, given in units of `unit` MiB; 0 when absent. HAMi keeps the
/// scaled value in an int32.
pub fn memory(c: &ContainerView, name: &str, unit: u64) -> Result<u64, Unusable> {
    let unit = unit.max(1);
    let limit = I32_MAX / i64::try_from(unit).unwrap_or(i64::MAX);
    Ok(int_in(given(c, name), name, 0..=limit)?.map_or(0, |m| m.unsigned_abs() * unit))
}

/// Cores, limit else request, `default` when absent: a whole number in int32 range (a negative
/// value would subtract usage).
pub fn cores(c: &ContainerView, name: &str, default: u32) -> Result<u32, Unusable> {
    cores_of(given(c, name), name, default)
}

/// The request of the vendors that read a count, memory in units of `names.memory_factor` MiB and
/// cores (`default_cores` when absent): HAMi's Cambricon, Hygon, Iluvatar and Mthreads. The
/// percentage is 100 only without memory.
pub fn count_memory_cores(
    id: VendorId,
    c: &ContainerView,
    names: Names<'_>,
    default_cores: u32,
) -> Result<Option<ContainerRequest>, Unusable> {
    let Some(nums) = count(c, names.count)? else { return Ok(None) };
    let memreq = memory(c, names.memory, names.memory_factor)?;
    let cores = cores(c, names.cores, default_cores)?;
    let mempct = if memreq == 0 { 100 } else { 0 };
    Ok(Some(ContainerRequest::new(id, nums, memreq, mempct, cores)))
}

/// Cores from an already chosen quantity (see [`cores`]).
pub fn cores_of(q: Option<&QuantityText>, name: &str, default: u32) -> Result<u32, Unusable> {
    Ok(int_in(q, name, 0..=I32_MAX)?.map_or(default, |v| v.unsigned_abs() as u32))
}

#[cfg(test)]
mod tests;
