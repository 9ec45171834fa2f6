//! Checkpoints: the full state of a chain (position, sampler state, estimator state, random
//! streams, counters) as bytes, so that a run killed or interrupted can be resumed and give
//! exactly the draws an uninterrupted run would have.
//!
//! A component implements [`Persist`] (usually through [`persist_fields!`], which lists the
//! fields that carry state); samplers, estimators and kernels forward to it from their
//! `save_state`/`load_state` methods. The encoding is a sequence of named, typed fields
//! (little-endian; f64 as their bits, so every value round-trips exactly); a reader checks
//! each name, type and length, so a checkpoint of another configuration is an error, never a
//! silently wrong state. Written by hand: the format is a few dozen lines, and the state holds
//! f64 that a text format would not round-trip exactly by default.

use crate::rng::ChainRng;
use rand::SeedableRng;
use std::collections::VecDeque;

/// Errors reading a checkpoint. `Display` is one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The next field is not the one this component expects.
    #[error(
        "checkpoint: expected field `{expected}`, found `{found}` (was it written by another configuration?)"
    )]
    Mismatch {
        /// The field expected.
        expected: String,
        /// The field found.
        found: String,
    },
    /// The bytes end before the state does.
    #[error("checkpoint: truncated at field `{0}`")]
    Truncated(String),
    /// A value that does not fit this chain (another chain's checkpoint, a field of another
    /// size or kind).
    #[error("checkpoint: {0}")]
    Invalid(String),
    /// Bytes are left after the state.
    #[error(
        "checkpoint: {0} bytes left after the state (was it written by another configuration?)"
    )]
    Trailing(usize),
    /// A component that cannot be checkpointed.
    #[error("{0} cannot be checkpointed (resume is not available for it)")]
    Unsupported(String),
}

/// The kinds of field payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    F64 = b'f',
    U64 = b'u',
    U32 = b'i',
    Nested = b'n',
}

/// Writes a state as bytes.
#[derive(Debug, Default)]
pub struct StateWriter {
    bytes: Vec<u8>,
    /// The first component that could not be saved.
    unsupported: Option<String>,
}

impl StateWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `component` cannot be saved ([`StateWriter::finish`] then fails).
    pub fn unsupported(&mut self, component: &str) {
        self.unsupported
            .get_or_insert_with(|| component.to_string());
    }

    /// The bytes, or the first component that could not be saved.
    pub fn finish(self) -> Result<Vec<u8>, StateError> {
        match self.unsupported {
            Some(c) => Err(StateError::Unsupported(c)),
            None => Ok(self.bytes),
        }
    }

    /// Writes the field `name` holding `value`.
    pub fn field<T: Persist + ?Sized>(&mut self, name: &str, value: &T) {
        self.field_with(name, |w| value.save(w));
    }

    /// Writes the field `name` whose value `save` writes (a component behind a trait object).
    pub fn field_with(&mut self, name: &str, save: impl FnOnce(&mut StateWriter)) {
        let len = u8::try_from(name.len()).expect("field names are short");
        self.bytes.push(len);
        self.bytes.extend_from_slice(name.as_bytes());
        save(self);
    }

    fn header(&mut self, kind: Kind, count: usize) {
        self.bytes.push(kind as u8);
        self.bytes.extend_from_slice(&(count as u64).to_le_bytes());
    }

    /// A payload of f64 (as bits).
    pub fn f64s(&mut self, values: &[f64]) {
        self.header(Kind::F64, values.len());
        for v in values {
            self.bytes.extend_from_slice(&v.to_bits().to_le_bytes());
        }
    }

    /// A payload of u64.
    pub fn u64s(&mut self, values: impl ExactSizeIterator<Item = u64>) {
        self.header(Kind::U64, values.len());
        for v in values {
            self.bytes.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A payload of u32.
    pub fn u32s(&mut self, values: impl ExactSizeIterator<Item = u32>) {
        self.header(Kind::U32, values.len());
        for v in values {
            self.bytes.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A nested state of `fields` fields follows (a component's own fields).
    pub fn nested(&mut self, fields: usize) {
        self.header(Kind::Nested, fields);
    }
}

/// Reads a state from bytes written by [`StateWriter`].
#[derive(Debug)]
pub struct StateReader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The field being read (for messages).
    current: String,
}

impl<'a> StateReader<'a> {
    /// A reader over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            at: 0,
            current: String::from("(start)"),
        }
    }

    /// An error unless every byte was read.
    pub fn finish(self) -> Result<(), StateError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            left => Err(StateError::Trailing(left)),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], StateError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| StateError::Truncated(self.current.clone()))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// Reads the field `name` into `value`.
    pub fn field<T: Persist + ?Sized>(
        &mut self,
        name: &str,
        value: &mut T,
    ) -> Result<(), StateError> {
        self.field_with(name, |r| value.load(r))
    }

    /// Reads the field `name` with `load` (see [`StateWriter::field_with`]).
    pub fn field_with(
        &mut self,
        name: &str,
        load: impl FnOnce(&mut StateReader<'a>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        self.current = name.to_string();
        let len = self.take(1)?[0] as usize;
        let found = self.take(len)?;
        if found != name.as_bytes() {
            return Err(StateError::Mismatch {
                expected: name.to_string(),
                found: String::from_utf8_lossy(found).into_owned(),
            });
        }
        load(self)
    }

    fn header(&mut self, kind: Kind) -> Result<usize, StateError> {
        let found = self.take(1)?[0];
        if found != kind as u8 {
            return Err(StateError::Invalid(format!(
                "field `{}` holds values of kind '{}', this chain's of kind '{}'",
                self.current, found as char, kind as u8 as char
            )));
        }
        let count = u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
        usize::try_from(count).map_err(|_| StateError::Truncated(self.current.clone()))
    }

    fn words<const N: usize>(
        &mut self,
        kind: Kind,
    ) -> Result<impl Iterator<Item = [u8; N]> + 'a, StateError> {
        let count = self.header(kind)?;
        let bytes = self.take(
            count
                .checked_mul(N)
                .ok_or_else(|| StateError::Truncated(self.current.clone()))?,
        )?;
        Ok(bytes
            .chunks_exact(N)
            .map(|c| c.try_into().expect("N bytes")))
    }

    /// A payload of f64 written by [`StateWriter::f64s`].
    pub fn f64s(&mut self) -> Result<impl Iterator<Item = f64> + 'a, StateError> {
        Ok(self
            .words::<8>(Kind::F64)?
            .map(|w| f64::from_bits(u64::from_le_bytes(w))))
    }

    /// A payload of u64 written by [`StateWriter::u64s`].
    pub fn u64s(&mut self) -> Result<impl Iterator<Item = u64> + 'a, StateError> {
        Ok(self.words::<8>(Kind::U64)?.map(u64::from_le_bytes))
    }

    /// A payload of u32 written by [`StateWriter::u32s`].
    pub fn u32s(&mut self) -> Result<impl Iterator<Item = u32> + 'a, StateError> {
        Ok(self.words::<4>(Kind::U32)?.map(u32::from_le_bytes))
    }

    /// A nested state of `fields` fields (see [`StateWriter::nested`]).
    pub fn nested(&mut self, fields: usize) -> Result<(), StateError> {
        let found = self.header(Kind::Nested)?;
        if found != fields {
            return Err(StateError::Invalid(format!(
                "`{}` has {found} fields, this chain's {fields}",
                self.current
            )));
        }
        Ok(())
    }

    /// Exactly one value from a payload (a scalar field).
    fn one<T>(&mut self, mut values: impl Iterator<Item = T>) -> Result<T, StateError> {
        match (values.next(), values.next()) {
            (Some(v), None) => Ok(v),
            _ => Err(StateError::Invalid(format!(
                "field `{}` is not one value",
                self.current
            ))),
        }
    }
}

/// A component whose state can be saved to and restored from a checkpoint.
pub trait Persist {
    /// Appends the state to `w`.
    fn save(&self, w: &mut StateWriter);
    /// Restores the state [`Persist::save`] wrote.
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError>;
}

impl Persist for f64 {
    fn save(&self, w: &mut StateWriter) {
        w.f64s(std::slice::from_ref(self));
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let values = r.f64s()?;
        *self = r.one(values)?;
        Ok(())
    }
}

impl Persist for u64 {
    fn save(&self, w: &mut StateWriter) {
        w.u64s(std::iter::once(*self));
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let values = r.u64s()?;
        *self = r.one(values)?;
        Ok(())
    }
}

impl Persist for usize {
    fn save(&self, w: &mut StateWriter) {
        (*self as u64).save(w);
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let mut v = 0u64;
        v.load(r)?;
        *self = usize::try_from(v).map_err(|_| StateError::Truncated(r.current.clone()))?;
        Ok(())
    }
}

impl Persist for bool {
    fn save(&self, w: &mut StateWriter) {
        u64::from(*self).save(w);
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let mut v = 0u64;
        v.load(r)?;
        *self = v != 0;
        Ok(())
    }
}

impl Persist for Vec<f64> {
    fn save(&self, w: &mut StateWriter) {
        w.f64s(self);
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let values = r.f64s()?;
        self.clear();
        self.extend(values);
        Ok(())
    }
}

/// A signed counter, stored as its two's-complement bits.
impl Persist for i32 {
    fn save(&self, w: &mut StateWriter) {
        u64::from(self.cast_unsigned()).save(w);
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let mut v = 0u64;
        v.load(r)?;
        *self = u32::try_from(v)
            .map_err(|_| StateError::Invalid(format!("`{}` is not a 32-bit value", r.current)))?
            .cast_signed();
        Ok(())
    }
}

/// Flags (a restored vector takes the stored length).
impl Persist for Vec<bool> {
    fn save(&self, w: &mut StateWriter) {
        w.u64s(self.iter().map(|&b| u64::from(b)));
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let values = r.u64s()?;
        self.clear();
        self.extend(values.map(|v| v != 0));
        Ok(())
    }
}

/// Indices (a permutation, an order; a restored vector takes the stored length).
impl Persist for Vec<usize> {
    fn save(&self, w: &mut StateWriter) {
        w.u64s(self.iter().map(|&i| i as u64));
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let values: Vec<u64> = r.u64s()?.collect();
        self.clear();
        for v in values {
            self.push(usize::try_from(v).map_err(|_| StateError::Truncated(r.current.clone()))?);
        }
        Ok(())
    }
}

/// Rows of values of any lengths (per-chain traces or draws): their count, then each row.
impl Persist for Vec<Vec<f64>> {
    fn save(&self, w: &mut StateWriter) {
        w.nested(self.len());
        for row in self {
            w.field("row", row);
        }
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        r.nested(self.len())?;
        for row in self.iter_mut() {
            r.field("row", row)?;
        }
        Ok(())
    }
}

/// u32 sequences (index buffers, block offsets): a restored one takes the stored length.
macro_rules! persist_u32s {
    ($($ty:ty),*) => {$(
        impl Persist for $ty {
            fn save(&self, w: &mut StateWriter) {
                w.u32s(self.iter().copied());
            }
            fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
                let values = r.u32s()?;
                self.clear();
                self.extend(values);
                Ok(())
            }
        }
    )*};
}
persist_u32s!(Vec<u32>, VecDeque<u32>);

/// The generator's four state words ([`ChainRng::state`]), restored exactly.
impl Persist for ChainRng {
    fn save(&self, w: &mut StateWriter) {
        let state = self.state();
        w.u64s(
            state
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))),
        );
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let words: Vec<u64> = r.u64s()?.collect();
        if words.len() != 4 {
            return Err(StateError::Invalid(format!(
                "field `{}` has {} generator words, not 4",
                r.current,
                words.len()
            )));
        }
        let mut seed = [0u8; 32];
        for (chunk, w) in seed.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        *self = ChainRng::from_seed(seed);
        Ok(())
    }
}

/// Generators one after another (a restored vector takes the stored length).
impl Persist for Vec<ChainRng> {
    fn save(&self, w: &mut StateWriter) {
        w.nested(self.len());
        for rng in self {
            w.field("rng", rng);
        }
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let count = r.header(Kind::Nested)?;
        self.clear();
        for _ in 0..count {
            let mut rng = crate::rng::stream(0, 0);
            r.field("rng", &mut rng)?;
            self.push(rng);
        }
        Ok(())
    }
}

/// `None` as an empty nested state, `Some(v)` as one field; loading `Some` into `None` builds
/// the value with `T::default()` first.
impl<T: Persist + Default> Persist for Option<T> {
    fn save(&self, w: &mut StateWriter) {
        match self {
            None => w.nested(0),
            Some(v) => {
                w.nested(1);
                w.field("some", v);
            }
        }
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let count = r.header(Kind::Nested)?;
        match count {
            0 => *self = None,
            1 => r.field("some", self.get_or_insert_with(T::default))?,
            n => {
                return Err(StateError::Invalid(format!(
                    "`{}` has {n} fields, an option 0 or 1",
                    r.current
                )));
            }
        }
        Ok(())
    }
}

/// Implements [`Persist`] for a type by its fields, in the order given:
/// `persist_fields!(Sgld { state, epsilon });` (lifetimes as `Minibatch<'_>`).
#[macro_export]
macro_rules! persist_fields {
    ($ty:ty { $($field:ident),* $(,)? }) => {
        impl $crate::checkpoint::Persist for $ty {
            fn save(&self, w: &mut $crate::checkpoint::StateWriter) {
                w.nested(<[&str]>::len(&[$(stringify!($field)),*]));
                $( w.field(stringify!($field), &self.$field); )*
            }
            fn load(
                &mut self,
                r: &mut $crate::checkpoint::StateReader<'_>,
            ) -> Result<(), $crate::checkpoint::StateError> {
                r.nested(<[&str]>::len(&[$(stringify!($field)),*]))?;
                $( r.field(stringify!($field), &mut self.$field)?; )*
                Ok(())
            }
        }
    };
}

/// The `save_state`/`load_state` methods of a sampler, estimator or kernel trait, through the
/// implementing type's [`Persist`] impl.
macro_rules! state_through_persist {
    () => {
        fn save_state(&self, w: &mut $crate::checkpoint::StateWriter) {
            $crate::checkpoint::Persist::save(self, w);
        }
        fn load_state(
            &mut self,
            r: &mut $crate::checkpoint::StateReader<'_>,
        ) -> Result<(), $crate::checkpoint::StateError> {
            $crate::checkpoint::Persist::load(self, r)
        }
    };
}
pub(crate) use state_through_persist;

/// `value`'s state as bytes.
pub fn to_bytes<T: Persist + ?Sized>(value: &T) -> Result<Vec<u8>, StateError> {
    let mut w = StateWriter::new();
    w.field("state", value);
    w.finish()
}

/// Restores `value` from bytes [`to_bytes`] wrote; every byte must be used.
pub fn from_bytes<T: Persist + ?Sized>(value: &mut T, bytes: &[u8]) -> Result<(), StateError> {
    let mut r = StateReader::new(bytes);
    r.field("state", value)?;
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[derive(Debug, Default, PartialEq)]
    struct Example {
        theta: Vec<f64>,
        count: usize,
        flag: bool,
        offsets: VecDeque<u32>,
        centre: Option<Vec<f64>>,
        stream: Vec<ChainRng>,
        xi: f64,
    }
    persist_fields!(Example {
        theta,
        count,
        flag,
        offsets,
        centre,
        stream,
        xi
    });

    fn example() -> Example {
        let mut rng = crate::rng::stream(3, 1);
        rng.next_u64();
        Example {
            theta: vec![1.5, -0.0, f64::MIN_POSITIVE, 1e300, std::f64::consts::PI],
            count: 7,
            flag: true,
            offsets: [3u32, 9, 27].into_iter().collect(),
            centre: Some(vec![0.5]),
            stream: vec![rng],
            xi: -2.25,
        }
    }

    #[test]
    fn a_state_round_trips_exactly() {
        let a = example();
        let bytes = to_bytes(&a).unwrap();
        let mut b = Example::default();
        from_bytes(&mut b, &bytes).unwrap();
        assert_eq!(a, b);
        // The restored stream continues as the original does.
        let (mut ra, mut rb) = (a.stream[0].clone(), b.stream[0].clone());
        for _ in 0..10 {
            assert_eq!(ra.next_u64(), rb.next_u64());
        }
    }

    #[test]
    fn another_layout_or_truncated_bytes_are_errors() {
        let bytes = to_bytes(&example()).unwrap();
        let mut b = Example::default();
        let e = from_bytes(&mut b, &bytes[..bytes.len() - 3]).unwrap_err();
        assert!(matches!(e, StateError::Truncated(_)), "{e}");
        let mut longer = bytes.clone();
        longer.push(0);
        let e = from_bytes(&mut b, &longer).unwrap_err();
        assert!(matches!(e, StateError::Trailing(1)), "{e}");
        // A field renamed: the reader names both.
        let mut other = bytes.clone();
        let at = other.windows(5).position(|w| w == b"theta").unwrap();
        other[at..at + 5].copy_from_slice(b"thetb");
        let e = from_bytes(&mut b, &other).unwrap_err();
        assert!(
            e.to_string()
                .contains("expected field `theta`, found `thetb`"),
            "{e}"
        );
    }

    #[test]
    fn an_unsupported_component_fails_the_save() {
        let mut w = StateWriter::new();
        w.unsupported("a test kernel");
        assert_eq!(
            w.finish().unwrap_err().to_string(),
            "a test kernel cannot be checkpointed (resume is not available for it)"
        );
    }
}
